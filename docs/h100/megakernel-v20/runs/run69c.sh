#!/usr/bin/env bash
# Device run 69c (v20 candidate: input gathers with two rounds of polls in flight, QK_MEGAKERNEL_POLL_STAGGER in
# cycles): ids with the knob on; A/B against v19 (v19's addon, built from 1581699) and the knob at 0 / 200 / 400 / 700 / 1000 cycles,
# 3 rounds alternating, 0.6B at positions 1/128/512/1024; 32-token windows at 1 and 2 chunks per head.
# (Shared steps in lib.sh; as run, they were written out in each script.)
. "$(dirname "$0")/lib.sh"
run_setup r69c baseline
knob_run s QK_MEGAKERNEL_POLL_STAGGER sleep "0 400 1000" "0 200 400 700 1000" "0 400 700"
echo "t=$(elapsed)"
