#!/usr/bin/env bash
# Device run 78c (v29): HF's division without __fdiv_rn's slow path (weight_div). The probe (weight_div against
# __fdiv_rn over every p in [2^-100, 1] for 64 sums); GPU tests; greedy ids; 3 alternating rounds at 1/128 of off,
# staged to 384 (HF's roundings, the new division), flash-style, and with __fdiv_rn (QK_MEGAKERNEL_STAGED_HF=5);
# stage traces (one step per launch) of off and staged to 384 at positions 140 and 260.
. "$(dirname "$0")/lib.sh"
run_setup r78c
div_probe
gpu_tests
pack
U=QK_MEGAKERNEL_STAGED_UNTIL=384
env $U genw $B greedy-r384.json 256 --engine megakernel --temperature 0; echo "greedy r384 rc=$? $(ids $R/greedy-r384.json) (78a, __fdiv_rn: c3947782)"
rounds 3 1,128 256 "off $B X=1" "r384 $B $U" "r384f $B $U QK_MEGAKERNEL_STAGED_HF=0" "r384m5 $B $U QK_MEGAKERNEL_STAGED_HF=5"
pack
traces "140 260" "off X=1" "r384 $U"
echo "t=$(elapsed)"
