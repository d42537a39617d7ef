#!/usr/bin/env bash
# Device run 81f (v32): the host knobs again, on the staged kernel (tuned through v29 on the kernel with both paths):
# 2 alternating rounds at position 128 of the landed build with its defaults and with one knob changed each.
. "$(dirname "$0")/lib.sh"
run_setup r81f
rounds 2 128 256 "def $B X=1" "infl2 $B QK_MEGAKERNEL_INFLIGHT=2" "infl0 $B QK_MEGAKERNEL_INFLIGHT=0" \
  "lm1 $B QK_MEGAKERNEL_LM_INFLIGHT=1" "lm3 $B QK_MEGAKERNEL_LM_INFLIGHT=3" "pairs $B QK_MEGAKERNEL_QKV_QUADS=0" \
  "steps8 $B QK_MEGAKERNEL_STEPS=8" "steps16 $B QK_MEGAKERNEL_STEPS=16" "l2off $B QK_MEGAKERNEL_L2_STREAM=0" \
  "slot24 $B QK_MEGAKERNEL_SLOT_KB=24" "def $B X=1"
pack
echo "t=$(elapsed)"
