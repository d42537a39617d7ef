#!/usr/bin/env bash
# Device run 81a (v32): kernels of one attention path. GPU tests; v29's ids from the path kernels (the default) and
# from the kernel with both paths (QK_MEGAKERNEL_PATH_KERNELS=0); 3 alternating rounds at positions 1, 128, 512 and
# 1024 of main (v29's kernels), the path kernels, and this build's kernel with both.
. "$(dirname "$0")/lib.sh"
run_setup r81a baseline
gpu_tests
path_ids path $B X=1
path_ids both $B QK_MEGAKERNEL_PATH_KERNELS=0
gen_ids 1.7b path $B; echo "(v29: e2ce96aa)"
pack
rounds 3 1,128,512,1024 256 "main $O X=1" "path $B X=1" "both $B QK_MEGAKERNEL_PATH_KERNELS=0"
pack
echo "t=$(elapsed)"
