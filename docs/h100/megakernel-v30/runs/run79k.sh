#!/usr/bin/env bash
# Device run 79k (v30): 79g plus the score roundings spread over the four lanes of a row (each lane one of the four
# scores it holds; lanes t = 0 rounded all four): GPU tests, ids, alternating rounds against off, traces.
. "$(dirname "$0")/lib.sh"
run_setup r79k
rework_check
echo "t=$(elapsed)"
