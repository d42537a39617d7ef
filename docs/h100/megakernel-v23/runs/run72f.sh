#!/usr/bin/env bash
# Device run 72f (v23): run 72e's profile puts the attention block's own work (QK-norm, RoPE, the pass, the warps'
# merge) at about 1.7 µs of every layer's critical path at one chunk. sc: main with the RoPE angles (sincosf of the
# position) computed while the q/k/v gather's first poll is in flight instead of after q lands (the same bits). GPU
# tests on sc, greedy ids (must be main's aa30529c), 400 greedy and sampled; A/B 3 rounds at 1/128/512/1024 and
# 32-token windows at 8/64/120/232, 3 rounds; 8B at 1/1024 once each.
. "$(dirname "$0")/lib.sh"
setup r72f
candidate_node sc
gpu_tests_in SC
genw $SC greedy-sc.json 256 --engine megakernel --temperature 0; echo "greedy sc rc=$? $(ids $R/greedy-sc.json) (main: aa30529c)"
ids_400_sampled sc $SC
rounds 3 1,128,512,1024 256 "main $B X=1" "sc $SC X=1"
rounds 3 8,64,120,232 32 "w-main $B X=1" "w-sc $SC X=1"
i=1; ab8 main $B X=1; ab8 sc $SC X=1
echo "t=$(elapsed)"
