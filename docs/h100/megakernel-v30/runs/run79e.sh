#!/usr/bin/env bash
# Device run 79e (v30): the staged attention reworked for latency (three tiles per scores pass, branchless score
# roundings, a 3-step max, dims 112-127 as two chains on warps 5 and 6, the output published from registers), meant
# to give the same bits: GPU tests, greedy/sampled ids against v29's, 3 alternating rounds against off (chunks), traces.
. "$(dirname "$0")/lib.sh"
run_setup r79e
rework_check
echo "t=$(elapsed)"
