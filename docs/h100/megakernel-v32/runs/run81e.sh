#!/usr/bin/env bash
# Device run 81e (v32): the sweep of the build that lands (0.6B; 256 tokens, median of 3; HF static cache + CUDA graph
# and the layered engine in the same run; the copy ceiling), then 3 alternating rounds against main (v29's kernels)
# at positions 1, 128, 512 and 1024.
. "$(dirname "$0")/lib.sh"
run_setup r81e baseline
sweep06 1,128,512,1024,4096
pack
rounds 3 1,128,512,1024 256 "main $O X=1" "land $B X=1"
pack
echo "t=$(elapsed)"
