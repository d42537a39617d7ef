#!/usr/bin/env bash
# Device run 69d (v20 candidate: a larger bound on weight copies in flight while the consumers are in a layer's GEMV
# stage, QK_MEGAKERNEL_GEMV_INFLIGHT): ids with the knob on; A/B against v19 (v19's addon, built from 1581699) and the knob at
# 0 / 2 / 3 / 4, 3 rounds alternating, 0.6B at positions 1/128/512/1024; 32-token windows; 8B at 1/1024 with 0 and 2.
# (Shared steps in lib.sh; as run, they were written out in each script.)
. "$(dirname "$0")/lib.sh"
run_setup r69d baseline
knob_run g QK_MEGAKERNEL_GEMV_INFLIGHT gemv_inflight "0 2 4" "0 2 3 4" "0 2 3"
for s in 0 2; do ab8 g$s $B QK_MEGAKERNEL_GEMV_INFLIGHT=$s; done
echo "t=$(elapsed)"
