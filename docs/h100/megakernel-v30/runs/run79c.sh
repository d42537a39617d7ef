#!/usr/bin/env bash
# Device run 79c (v30): Nsight Compute source counters (as v23's run 72e) on the first megakernel launch of a greedy
# 0.6B decode from a ~256-token prompt: its steps take the staged attention at ~257-264 keys. Stall reasons per SASS
# instruction of the staged attention (blocks 0-7).
. "$(dirname "$0")/lib.sh"
run_setup r79c
ncu_source 300
pack
echo "t=$(elapsed)"
