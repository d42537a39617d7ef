#!/usr/bin/env bash
# Device run 79g (v30): 79e plus the V·P pass without per-tile checks (full groups of four tiles apart from the last),
# one 8-byte load per weight operand, no query-column masks: GPU tests, ids, alternating rounds against off, traces.
. "$(dirname "$0")/lib.sh"
run_setup r79g
rework_check
echo "t=$(elapsed)"
