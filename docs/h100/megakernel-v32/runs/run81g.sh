#!/usr/bin/env bash
# Device run 81g (v32): the small levers together at positions 1 and 128, 3 alternating rounds: the landed build ($B)
# and the rework in the staged kernel (patches/staged-kernel-rework.patch on the landed build; $O), each with its
# defaults and with one LM-head copy in flight and 16 steps per launch (QK_MEGAKERNEL_LM_INFLIGHT=1,
# QK_MEGAKERNEL_STEPS=16).
. "$(dirname "$0")/lib.sh"
BASE_NODE=.device/rework.node.xz
run_setup r81g baseline
rounds 3 1,128 256 "land $B X=1" "land+ $B QK_MEGAKERNEL_LM_INFLIGHT=1 QK_MEGAKERNEL_STEPS=16" \
  "rework $O X=1" "rework+ $O QK_MEGAKERNEL_LM_INFLIGHT=1 QK_MEGAKERNEL_STEPS=16"
pack
echo "t=$(elapsed)"
