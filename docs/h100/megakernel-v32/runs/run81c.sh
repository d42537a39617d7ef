#!/usr/bin/env bash
# Device run 81c (v32): v30's rework of the staged attention (v31's race-free patch) in the staged kernel only (the
# kernel with both paths keeps v29's), against this version's build (A: the staged kernel with v29's arithmetic) as
# the baseline bundle; 3 alternating rounds at positions 1, 128, 512 and 1024, and A flash-style
# (QK_MEGAKERNEL_STAGED_HF=0) at 128; the rework's ids.
. "$(dirname "$0")/lib.sh"
BASE_NODE=.device/a.node.xz
run_setup r81c baseline
path_ids rework $B X=1
pack
rounds 3 1,128,512,1024 256 "A $O X=1" "rework $B X=1"
pack
rounds 2 128 256 "Aflash $O QK_MEGAKERNEL_STAGED_HF=0"
pack
echo "t=$(elapsed)"
