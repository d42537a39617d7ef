#!/usr/bin/env bash
# Device run 69b (v20 candidate: flagged-word waits that sleep between polls, QK_MEGAKERNEL_POLL_SLEEP_NS): ids with
# the knob on; A/B against v19 (v19's addon, built from 1581699) and the knob at 0 / 64 / 128 / 256 / 512 ns, 3 rounds alternating,
# 0.6B at positions 1/128/512/1024; 32-token windows at 1 and 2 chunks per head.
# (Shared steps in lib.sh; as run, they were written out in each script.)
. "$(dirname "$0")/lib.sh"
run_setup r69b baseline
knob_run s QK_MEGAKERNEL_POLL_SLEEP_NS sleep "0 128 512" "0 64 128 256 512" "0 128 256"
echo "t=$(elapsed)"
