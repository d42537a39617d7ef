#!/usr/bin/env bash
# Device run 70c (v21 candidate 2: gate/up units dealt to the warps four at a time, QK_MEGAKERNEL_GATEUP_FOURS=1, the
# same bits): GPU tests (with its test); the reference ids with the knob on and off; A/B against v20 (804f1f8's addon),
# 5 rounds alternating, 0.6B at positions 1/128/512/1024; 32-token windows of 1, 2, 3 and 5 chunks per head, 2 rounds.
. "$(dirname "$0")/lib.sh"
run_setup r70c baseline
gpu_tests
reference_ids
gen greedy-off.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy-off.json) (v9-v20: aa30529c)"
QK_MEGAKERNEL_GATEUP_FOURS=1 gen greedy-fours.json 256 --engine megakernel --temperature 0; echo "greedy fours rc=$? $(ids $R/greedy-fours.json) (v9-v20: aa30529c)"
QK_MEGAKERNEL_GATEUP_FOURS=1 gen greedy400-fours.json 400 --engine megakernel --temperature 0; echo "greedy 400 fours rc=$? $(ids $R/greedy400-fours.json) (v12-v20: d7460a19)"
QK_MEGAKERNEL_GATEUP_FOURS=1 gen sampled-fours.json 256 --engine megakernel --seed 1; echo "sampled fours rc=$? $(ids $R/sampled-fours.json) (v10-v20: dc211a68)"
rounds 5 1,128,512,1024 256 "v20 $O X=1" "off $B X=1" "fours $B QK_MEGAKERNEL_GATEUP_FOURS=1"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-off $B X=1" "w-fours $B QK_MEGAKERNEL_GATEUP_FOURS=1"
echo "t=$(elapsed)"
