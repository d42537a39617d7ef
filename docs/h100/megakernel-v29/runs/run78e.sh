#!/usr/bin/env bash
# Device run 78e (v29): HF agreement of main's bits (staged off) and of the staged attention to 384 keys with HF's
# roundings (weight_div) for seeds 4-7 (78b measured seeds 0-3 of the latter; v7-v28 those of main's), and synccheck
# and racecheck of a 4-token decode over the whole ring.
. "$(dirname "$0")/lib.sh"
run_setup r78e
P=/tmp/b/bundle/peers/hf_reference.py
for s in 4 5 6 7; do
  (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
  timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-off.json > $R/cmp-seed$s-off.md 2>&1; echo "compare seed $s off rc=$? $(tail -1 $R/cmp-seed$s-off.md) $(elapsed)"
  QK_MEGAKERNEL_STAGED_UNTIL=384 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-r1.json > $R/cmp-seed$s-r1.md 2>&1; echo "compare seed $s r1 rc=$? $(tail -1 $R/cmp-seed$s-r1.md) $(elapsed)"
  pack
done
ring_sanitizers X=1
pack
echo "t=$(elapsed)"
