#!/usr/bin/env bash
# Device run 80e (v31): the landed build's 10 greedy repeats; 3 alternating rounds against main (v29's kernels) at
# positions 1, 128 and 1024; then HF's agreement with itself (HF bf16 sdpa and float32 against HF bf16 eager, and the
# megakernel against all three) at seeds 0-3, as run 79n measured it at seeds 5 and 7, as far as the call's time goes.
. "$(dirname "$0")/lib.sh"
run_setup r80e baseline
repeat_ids
rounds 3 1,128,1024 256 "main $O X=1" "land $B X=1"
pack
for s in 0 1 2 3; do floor $s; pack; done
echo "t=$(elapsed)"
