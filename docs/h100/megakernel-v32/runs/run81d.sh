#!/usr/bin/env bash
# Device run 81d (v32): the checks of the build that lands (the staged kernel, v29's arithmetic): GPU tests, v29's
# ids from it and from the kernel with both paths, 10 greedy repeats, synccheck and racecheck on a 4-token decode
# staged from position 1 (the staged kernel) and on the default (the kernel with both paths).
. "$(dirname "$0")/lib.sh"
run_setup r81d
gpu_tests
path_ids land $B X=1
path_ids both $B QK_MEGAKERNEL_PATH_KERNELS=0
gen_ids 1.7b land $B; echo "(v29: e2ce96aa)"
repeat_ids
pack
ring_sanitizers
pack
sanitizers_with default X=1
pack
echo "t=$(elapsed)"
