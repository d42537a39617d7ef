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
for i in 1 2 3 4 5; do
  ab v20 1,128,512,1024 256 $O X=1
  ab off 1,128,512,1024 256 $B X=1
  ab fours 1,128,512,1024 256 $B QK_MEGAKERNEL_GATEUP_FOURS=1
done
for i in 1 2; do
  ab w-v20 8,64,120,232 32 $O X=1
  ab w-off 8,64,120,232 32 $B X=1
  ab w-fours 8,64,120,232 32 $B QK_MEGAKERNEL_GATEUP_FOURS=1
done
echo "t=$(elapsed)"
