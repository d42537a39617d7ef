#!/usr/bin/env bash
# Device run 77e (v28): HF agreement of the staged attention (QK_MEGAKERNEL_STAGED_UNTIL=256) beside main's bits, on
# the 0.6B checkpoints hf_reference.py writes for seeds 0-3 (256 teacher-forced steps from a 32-token prompt,
# positions 32-287, HF bf16 eager), as v7's run 56a/56d and v27's 76c; then synccheck and racecheck of a staged decode.
. "$(dirname "$0")/lib.sh"
run_setup r77e
for s in 0 1 2 3; do
  agreement_of $s "off X=1" "st QK_MEGAKERNEL_STAGED_UNTIL=256"
  pack
done
staged_sanitizers
pack
echo "t=$(elapsed)"
