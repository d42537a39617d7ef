#!/usr/bin/env bash
# Device run 71b (v22: a register diet, then 11 consumer warps again). d7: 7 warps, the workspace layout in the kernel
# parameters and the block's constant pointers in shared memory (the same arithmetic as v20: the same ids expected);
# d11: the same with 11 consumer warps (register cap 168; 192-224 bytes of spills left, against 296-344 in run 71a's
# w11). GPU tests on both; ids; A/B against v20, 3 rounds alternating, 0.6B at 1/128/512/1024; 32-token windows at
# 8/64/120/232, 2 rounds; 8B at 1/1024 once each (v20, d7).
. "$(dirname "$0")/lib.sh"
run_setup r71b baseline
candidates .device/cand.tar.xz
candidate_node d7
candidate_node d11
gpu_tests_in D7
gpu_tests_in D11
for k in 1 2 3; do genw $D7 greedy-d7-$k.json 256 --engine megakernel --temperature 0; echo "greedy d7 $k rc=$? $(ids $R/greedy-d7-$k.json) (v9-v20: aa30529c)"; done
genw $D7 greedy400-d7.json 400 --engine megakernel --temperature 0; echo "greedy 400 d7 rc=$? $(ids $R/greedy400-d7.json) (v12-v20: d7460a19)"
genw $D7 sampled-d7.json 256 --engine megakernel --seed 1; echo "sampled d7 rc=$? $(ids $R/sampled-d7.json) (v10-v20: dc211a68)"
genw $D11 greedy-d11.json 256 --engine megakernel --temperature 0; echo "greedy d11 rc=$? $(ids $R/greedy-d11.json) (w11, run 71a: 90e2e1e6)"
rounds 3 1,128,512,1024 256 "v20 $O X=1" "d7 $D7 X=1" "d11 $D11 X=1"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-d7 $D7 X=1" "w-d11 $D11 X=1"
i=1; ab8 v20 $O X=1; ab8 d7 $D7 X=1
echo "t=$(elapsed)"
