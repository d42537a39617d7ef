#!/usr/bin/env bash
# Device run 80b (v31): 4 alternating rounds at positions 1 and 128 of main (v29's kernels), the rework (run 80a's,
# race-free) and the weights offset by the new key's score (QK_MEGAKERNEL_STAGED_HF=3); stage traces of both at 140
# and 260 keys; the staged attention's phases in cycles for both (QK_MEGAKERNEL_DEBUG 128/256).
. "$(dirname "$0")/lib.sh"
run_setup r80b baseline
rounds 4 1,128 256 "main $O X=1" "new $B X=1" "e3 $B QK_MEGAKERNEL_STAGED_HF=3"
pack
traces "140 260" "new X=1" "e3 QK_MEGAKERNEL_STAGED_HF=3"
for p in 140 260; do phase_cycles new $p X=1; phase_cycles e3 $p QK_MEGAKERNEL_STAGED_HF=3; done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
