#!/usr/bin/env bash
# Device run 71a (v22 candidate: 11 consumer warps instead of 7, QK_MEGAKERNEL_WARPS=11 at build time; the register
# cap falls from 255 to 168, and an attention pass holds 88 keys instead of 56): GPU tests on the candidate; its ids
# (3 greedy repeats, 400 greedy, sampled); A/B against v20 (804f1f8's addon), 3 rounds alternating, 0.6B at positions
# 1/128/512/1024; 32-token windows at 8/64/120/232 (v20: 1, 2, 3, 5 chunks per head), 2 rounds; 8B at 1/1024 once.
. "$(dirname "$0")/lib.sh"
run_setup r71a baseline
candidate W .device/w11.node.xz
gpu_tests_in W
for k in 1 2 3; do genw $W greedy-w11-$k.json 256 --engine megakernel --temperature 0; echo "greedy w11 $k rc=$? $(ids $R/greedy-w11-$k.json) (v9-v20: aa30529c)"; done
ids_400_sampled w11 $W
genw $W greedy-layered.json 256 --engine layered --temperature 0; echo "greedy layered rc=$? $(ids $R/greedy-layered.json)"
rounds 3 1,128,512,1024 256 "v20 $O X=1" "w11 $W X=1"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-w11 $W X=1"
i=1; ab8 v20 $O X=1; ab8 w11 $W X=1
echo "t=$(elapsed)"
