#!/usr/bin/env bash
# Device run 79i (v30): v29's build against 79g's (the reworked staged attention) on one warm machine, one bundle per
# call (two addons do not fit a call): `run79i.sh NAME K` runs 2 alternating rounds of the bundle as NAME and off.
. "$(dirname "$0")/lib.sh"
run_setup r79i-$1-$2
rounds 2 1,128 256 "$1 $B X=1" "off-$1 $B QK_MEGAKERNEL_STAGED_UNTIL=0"
echo "t=$(elapsed)"
