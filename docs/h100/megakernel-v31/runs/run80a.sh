#!/usr/bin/env bash
# Device run 80a (v31): v30's rework of the staged attention with warp 6's half of dims 112-127 passed to warp 5
# across the consumer barrier (no named barrier). First 2 alternating rounds at positions 1 and 128 of main (v29's
# kernels), the rework, the rework with the staged rows' copies L2 evict_last in a set-aside of persisting L2
# (QK_MEGAKERNEL_KV_L2_LAST=1), the weights offset by the new key's score (QK_MEGAKERNEL_STAGED_HF=3) and both; then
# GPU tests, ids (v29's, and those of HF=3 against HF=4, its __fdiv_rn twin), racecheck and synccheck over the whole
# ring with the default and with HF=3.
. "$(dirname "$0")/lib.sh"
run_setup r80a baseline
rounds 2 1,128 256 "main $O X=1" "new $B X=1" "l2 $B QK_MEGAKERNEL_KV_L2_LAST=1" "e3 $B QK_MEGAKERNEL_STAGED_HF=3" "e3l2 $B QK_MEGAKERNEL_STAGED_HF=3 QK_MEGAKERNEL_KV_L2_LAST=1"
grep -h "set aside" $R/ab-l2-1.log | head -1
pack
gpu_tests
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v29: c3947782)"
QK_MEGAKERNEL_KV_L2_LAST=1 genw $B greedy-l2.json 256 --engine megakernel --temperature 0; echo "greedy l2 rc=$? $(ids $R/greedy-l2.json) (v29: c3947782)"
QK_MEGAKERNEL_STAGED_HF=3 genw $B greedy-e3.json 400 --engine megakernel --temperature 0; echo "greedy 400 e3 rc=$? $(ids $R/greedy-e3.json)"
QK_MEGAKERNEL_STAGED_HF=4 genw $B greedy-e4.json 400 --engine megakernel --temperature 0; echo "greedy 400 e4 rc=$? $(ids $R/greedy-e4.json) (= e3: weight_div is __fdiv_rn past 1)"
pack
ring_sanitizers
sanitizers_with ring-e3 QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1 QK_MEGAKERNEL_STAGED_HF=3
pack
echo "t=$(elapsed)"
