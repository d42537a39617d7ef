#!/usr/bin/env bash
# Device run 81h (v32): run 81g's levers at every row of the sweep but 4096, 3 alternating rounds: the landed build
# with its defaults and with 16 steps per launch; the rework in the staged kernel ($O) with 16 steps per launch, and
# with one LM-head copy in flight as well (which also applies to the launches of the kernel with both paths here).
. "$(dirname "$0")/lib.sh"
BASE_NODE=.device/rework.node.xz
run_setup r81h baseline
rounds 3 1,128,512,1024 256 "land $B X=1" "land-s16 $B QK_MEGAKERNEL_STEPS=16" \
  "rework-s16 $O QK_MEGAKERNEL_STEPS=16" "rework+ $O QK_MEGAKERNEL_LM_INFLIGHT=1 QK_MEGAKERNEL_STEPS=16"
pack
echo "t=$(elapsed)"
