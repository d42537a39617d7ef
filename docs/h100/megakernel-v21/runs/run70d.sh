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
rounds 3 1,128,512,1024 256 "v20 $O X=1" "off $B X=1" "fours $B QK_MEGAKERNEL_GATEUP_FOURS=1" \
  "off32 $B QK_MEGAKERNEL_SLOT_KB=32" "fours32 $B QK_MEGAKERNEL_GATEUP_FOURS=1 QK_MEGAKERNEL_SLOT_KB=32"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-off $B X=1" "w-fours $B QK_MEGAKERNEL_GATEUP_FOURS=1" \
  "w-fours32 $B QK_MEGAKERNEL_GATEUP_FOURS=1 QK_MEGAKERNEL_SLOT_KB=32"
echo "t=$(elapsed)"
