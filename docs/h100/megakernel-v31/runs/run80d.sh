#!/usr/bin/env bash
# Device run 80d (v31): the build that lands (v30's rework of the staged attention, warp 6's chain handed to warp 5
# across the consumer barrier): GPU tests, v29's ids (greedy 256 and 400, sampled 256, 1.7B greedy 32), racecheck and
# synccheck over the whole ring, and the 0.6B sweep.
. "$(dirname "$0")/lib.sh"
run_setup r80d
gpu_tests
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v29: c3947782)"
ids_400_sampled land $B; echo "(v29: b924f925 / 24aa5aaf)"
gen_ids 1.7b land $B; echo "(v29: e2ce96aa)"
pack
ring_sanitizers
pack
sweep06 1,128,512,1024,4096
pack
echo "t=$(elapsed)"
