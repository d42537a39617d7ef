#!/usr/bin/env bash
# Device run 78d (v29): weight_div without __fdiv_rn in its code (zero weights return +0 themselves: run 78c's build
# still sent them through __fdiv_rn's slow path). The probe; GPU tests; greedy ids; 3 alternating rounds at 1/128 of
# off, staged to 384 with HF's roundings, flash-style; stage traces of both at positions 140 and 260.
. "$(dirname "$0")/lib.sh"
run_setup r78d
div_probe
gpu_tests
pack
U=QK_MEGAKERNEL_STAGED_UNTIL=384
QK_MEGAKERNEL_STAGED_UNTIL=384 genw $B greedy-r384.json 256 --engine megakernel --temperature 0; echo "greedy r384 rc=$? $(ids $R/greedy-r384.json) (78a, __fdiv_rn: c3947782)"
rounds 3 1,128 256 "off $B X=1" "r384 $B $U" "r384f $B $U QK_MEGAKERNEL_STAGED_HF=0"
pack
traces "140 260" "r384 $U" "r384f $U QK_MEGAKERNEL_STAGED_HF=0"
echo "t=$(elapsed)"
