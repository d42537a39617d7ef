#!/usr/bin/env bash
# Device run 77e (v28): HF agreement of the staged attention (QK_MEGAKERNEL_STAGED_UNTIL=256) beside main's bits, on
# the 0.6B checkpoints hf_reference.py writes for seeds 0-3 (256 teacher-forced steps from a 32-token prompt,
# positions 32-287, HF bf16 eager), as v7's run 56a/56d and v27's 76c; then synccheck and racecheck of a staged decode.
. "$(dirname "$0")/lib.sh"
run_setup r77e
P=/tmp/b/bundle/peers/hf_reference.py
for s in 0 1 2 3; do
  (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
  timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-off.json > $R/cmp-seed$s-off.md 2>&1; echo "compare seed $s off rc=$? $(tail -1 $R/cmp-seed$s-off.md)"
  QK_MEGAKERNEL_STAGED_UNTIL=256 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-st.json > $R/cmp-seed$s-st.md 2>&1; echo "compare seed $s staged rc=$? $(tail -1 $R/cmp-seed$s-st.md)"
  pack
done
staged_sanitizers
pack
echo "t=$(elapsed)"
