#!/usr/bin/env bash
# Device run 70d (v21 candidate 2, revised: a lone unit pair at a gate/up tile's end takes a turn of four rows, not
# eight): GPU tests; ids with the knob on; A/B against v20 (804f1f8's addon), 3 rounds alternating, 0.6B at positions
# 1/128/512/1024: the knob off and on, each on the default rings and on 32 KB slots for every launch
# (QK_MEGAKERNEL_SLOT_KB=32: gate/up tiles of 8 units, where the default short ring's 28 KB hold 6); windows, 2 rounds.
. "$(dirname "$0")/lib.sh"
run_setup r70d baseline
gpu_tests
QK_MEGAKERNEL_GATEUP_FOURS=1 gen greedy-fours.json 256 --engine megakernel --temperature 0; echo "greedy fours rc=$? $(ids $R/greedy-fours.json) (v9-v20: aa30529c)"
QK_MEGAKERNEL_GATEUP_FOURS=1 gen sampled-fours.json 256 --engine megakernel --seed 1; echo "sampled fours rc=$? $(ids $R/sampled-fours.json) (v10-v20: dc211a68)"
QK_MEGAKERNEL_GATEUP_FOURS=1 QK_MEGAKERNEL_SLOT_KB=32 gen greedy-fours32.json 256 --engine megakernel --temperature 0; echo "greedy fours 32 KB rc=$? $(ids $R/greedy-fours32.json) (v9-v20: aa30529c)"
for i in 1 2 3; do
  ab v20 1,128,512,1024 256 $O X=1
  ab off 1,128,512,1024 256 $B X=1
  ab fours 1,128,512,1024 256 $B QK_MEGAKERNEL_GATEUP_FOURS=1
  ab off32 1,128,512,1024 256 $B QK_MEGAKERNEL_SLOT_KB=32
  ab fours32 1,128,512,1024 256 $B QK_MEGAKERNEL_GATEUP_FOURS=1 QK_MEGAKERNEL_SLOT_KB=32
done
for i in 1 2; do
  ab w-v20 8,64,120,232 32 $O X=1
  ab w-off 8,64,120,232 32 $B X=1
  ab w-fours 8,64,120,232 32 $B QK_MEGAKERNEL_GATEUP_FOURS=1
  ab w-fours32 8,64,120,232 32 $B QK_MEGAKERNEL_GATEUP_FOURS=1 QK_MEGAKERNEL_SLOT_KB=32
done
echo "t=$(elapsed)"
