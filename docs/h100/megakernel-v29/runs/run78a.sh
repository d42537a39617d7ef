#!/usr/bin/env bash
# Device run 78a (v29): the staged attention over the whole ring (QK_MEGAKERNEL_STAGED_RING=1, or past 256 keys) and
# HF's roundings at one barrier (QK_MEGAKERNEL_STAGED_HF=2). GPU tests; greedy ids; 2 alternating rounds at 1/128 of
# off, staged to 256 (v28), the same over the whole ring, staged to 384 (whole ring) with HF's roundings at two
# barriers, at one, and flash-style; sanitizers of a decode over the whole ring.
. "$(dirname "$0")/lib.sh"
run_setup r78a
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy.json) (main: aa30529c)"
QK_MEGAKERNEL_STAGED_UNTIL=256 genw $B greedy-st256.json 256 --engine megakernel --temperature 0; echo "greedy st256 rc=$? $(ids $R/greedy-st256.json) (v28: c3947782)"
QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_RING=1 genw $B greedy-r256.json 256 --engine megakernel --temperature 0; echo "greedy r256 rc=$? $(ids $R/greedy-r256.json) (v28 staged: c3947782)"
QK_MEGAKERNEL_STAGED_UNTIL=384 genw $B greedy-r384.json 256 --engine megakernel --temperature 0; echo "greedy r384 rc=$? $(ids $R/greedy-r384.json)"
QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_HF=2 genw $B greedy-r384h2.json 256 --engine megakernel --temperature 0; echo "greedy r384 hf2 rc=$? $(ids $R/greedy-r384h2.json)"
pack
rounds 2 1,128 256 "off $B X=1" "st256 $B QK_MEGAKERNEL_STAGED_UNTIL=256" "r256 $B QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_RING=1" "r384 $B QK_MEGAKERNEL_STAGED_UNTIL=384" "r384h2 $B QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_HF=2" "r384f $B QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_HF=0"
pack
ring_sanitizers X=1
pack
echo "t=$(elapsed)"
