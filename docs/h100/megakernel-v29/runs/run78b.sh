#!/usr/bin/env bash
# Device run 78b (v29): why HF's roundings cost the staged attention over the whole ring ~25 µs per token at the 128
# row (run 78a): 2 alternating rounds at 128 of staged to 384 with HF's roundings, flash-style, and the diagnostics
# QK_MEGAKERNEL_STAGED_HF=3 (flash-style weights over HF's scores), 4 (ex2.approx), 5 (approximate division); HF's
# and flash-style with the LM head unscreened. Then HF agreement (seeds 0-3) of staged to 384 with HF's roundings
# at two barriers, at one, and flash-style.
. "$(dirname "$0")/lib.sh"
run_setup r78b
U=QK_MEGAKERNEL_STAGED_UNTIL=384
rounds 2 128 256 "r384 $B $U" "r384f $B $U QK_MEGAKERNEL_STAGED_HF=0" "r384m3 $B $U QK_MEGAKERNEL_STAGED_HF=3" "r384m4 $B $U QK_MEGAKERNEL_STAGED_HF=4" "r384m5 $B $U QK_MEGAKERNEL_STAGED_HF=5" "r384-ns $B $U QK_MEGAKERNEL_SCREEN=0" "r384f-ns $B $U QK_MEGAKERNEL_STAGED_HF=0 QK_MEGAKERNEL_SCREEN=0"
pack
P=/tmp/b/bundle/peers/hf_reference.py
for s in 0 1 2 3; do
  (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
  for v in "r1 1" "r2 2" "rf 0"; do
    read -r name hf <<< "$v"
    env $U QK_MEGAKERNEL_STAGED_HF=$hf timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-$name.json > $R/cmp-seed$s-$name.md 2>&1; echo "compare seed $s $name rc=$? $(tail -1 $R/cmp-seed$s-$name.md) $(elapsed)"
  done
  pack
done
echo "t=$(elapsed)"
