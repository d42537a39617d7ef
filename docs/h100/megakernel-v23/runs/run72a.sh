#!/usr/bin/env bash
# Device run 72a (v23: attention passes of 112 keys in the kernels of query groups up to 2, two lanes per key, so that
# Qwen3-0.6B needs no chunk merge below 112 keys). main: 244dac1's kernels; w16: the candidate (G = 1/2 kernels spill
# 12-20 bytes). GPU tests on w16 (written for 56-key passes: some may no longer test what they name); greedy ids (3
# repeats), 400 greedy, sampled; A/B 3 rounds at 1/128/512/1024 with w16 also at QK_MEGAKERNEL_CHUNK_KEYS=224 (two
# passes per chunk); 32-token windows at 8/64/120/232, 2 rounds.
. "$(dirname "$0")/lib.sh"
setup r72a
candidate_node w16
genw $B greedy-main.json 256 --engine megakernel --temperature 0; echo "greedy main rc=$? $(ids $R/greedy-main.json) (v9-v22: aa30529c)"
for k in 1 2 3; do genw $W16 greedy-w16-$k.json 256 --engine megakernel --temperature 0; echo "greedy w16 $k rc=$? $(ids $R/greedy-w16-$k.json)"; done
genw $W16 greedy400-w16.json 400 --engine megakernel --temperature 0; echo "greedy 400 w16 rc=$? $(ids $R/greedy400-w16.json)"
genw $W16 sampled-w16.json 256 --engine megakernel --seed 1; echo "sampled w16 rc=$? $(ids $R/sampled-w16.json)"
genw $W16 greedy-layered.json 256 --engine layered --temperature 0; echo "greedy layered rc=$? $(ids $R/greedy-layered.json)"
gpu_tests_in W16
rounds 3 1,128,512,1024 256 "main $B X=1" "w16 $W16 X=1" "w16c224 $W16 QK_MEGAKERNEL_CHUNK_KEYS=224"
rounds 2 8,64,120,232 32 "w-main $B X=1" "w-w16 $W16 X=1"
echo "t=$(elapsed)"
