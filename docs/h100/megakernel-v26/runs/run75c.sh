#!/usr/bin/env bash
# Device run 75c (v26): `samp`, sampled steps screening the LM head (the bundle of this build, with its addon, in
# .device/bundle.tar.xz). GPU tests; greedy, 400 greedy and sampled ids (main's references); 1.7B greedy ids and
# sampled ids screened and unscreened (QK_MEGAKERNEL_SCREEN=0: the unscreened sampled kernel is main's source);
# sampled decode speed from `generate --json` (256 tokens, default sampling: temperature 0.6, top-k 20, top-p 0.95),
# screened and unscreened, 5 rounds from a 5-token prompt and 3 from a 1,000-word one; synccheck and racecheck of a
# sampled decode; greedy speed at 1/128/1024 (3 rounds: main's addon did not fit the carry, so no A/B in this run; the
# screened argmax kernel's .text has main's size, with 4 of its instructions changed). Packed after each part.
. "$(dirname "$0")/lib.sh"
run_setup r75c
sampled_screen_run
echo "t=$(elapsed)"
