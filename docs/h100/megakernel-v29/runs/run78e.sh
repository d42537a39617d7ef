#!/usr/bin/env bash
# Device run 78e (v29): HF agreement of main's bits (staged off) and of the staged attention to 384 keys with HF's
# roundings (weight_div) for seeds 4-7 (78b measured seeds 0-3 of the latter; v7-v28 those of main's), and synccheck
# and racecheck of a 4-token decode over the whole ring.
. "$(dirname "$0")/lib.sh"
run_setup r78e
for s in 4 5 6 7; do
  agreement_of $s "off X=1" "r1 QK_MEGAKERNEL_STAGED_UNTIL=384"
  pack
done
ring_sanitizers X=1
pack
echo "t=$(elapsed)"
