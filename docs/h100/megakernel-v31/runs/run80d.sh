#!/usr/bin/env bash
# Device run 80d (v31): the rework that was a candidate to land (v30's rework of the staged attention, warp 6's chain
# handed to warp 5 across the consumer barrier): v29's `land_check` (GPU tests; greedy 256 and 400, sampled 256, 1.7B
# greedy 32; racecheck and synccheck over the whole ring; the 0.6B sweep). (The run spelled those steps out one by
# one, in the same order; this script calls the function that holds them.)
. "$(dirname "$0")/lib.sh"
run_setup r80d
land_check
echo "t=$(elapsed)"
