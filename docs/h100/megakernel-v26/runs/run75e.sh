#!/usr/bin/env bash
# Device run 75e (v26): `samp2`, run 75c's build with the sampled screen's threshold found by ranks (a binary search
# per warp list, no serial merges) and its candidates requested from L2 first, then recomputed two rows at a time. The
# same steps as run 75c (GPU tests, ids, 1.7B sampled ids screened and unscreened, sampled decode speed screened and
# unscreened in alternation, greedy speed, synccheck and racecheck of a sampled decode).
. "$(dirname "$0")/lib.sh"
run_setup r75e
sampled_screen_run
echo "t=$(elapsed)"
