#!/usr/bin/env bash
# Device run 77f (v28): the staged attention with HF's roundings (QK_MEGAKERNEL_STAGED_HF=1, now the default: q·kᵀ
# and its scaling rounded to bf16, fp32 softmax normalised before its bf16 rounding). GPU tests; HF agreement of main's
# bits (staged off), staged with HF's roundings and staged flash-style (QK_MEGAKERNEL_STAGED_HF=0) for seeds 0-3; then
# 2 alternating rounds at 1/128 and 32-token windows at 64/160/232.
. "$(dirname "$0")/lib.sh"
run_setup r77f
gpu_tests
pack
P=/tmp/b/bundle/peers/hf_reference.py
for s in 0 1 2 3; do
  (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
  timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-off.json > $R/cmp-seed$s-off.md 2>&1; echo "compare seed $s off rc=$? $(tail -1 $R/cmp-seed$s-off.md)"
  QK_MEGAKERNEL_STAGED_UNTIL=256 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-st.json > $R/cmp-seed$s-st.md 2>&1; echo "compare seed $s staged hf rc=$? $(tail -1 $R/cmp-seed$s-st.md)"
  QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-stf.json > $R/cmp-seed$s-stf.md 2>&1; echo "compare seed $s staged flash rc=$? $(tail -1 $R/cmp-seed$s-stf.md)"
  pack
done
rounds 2 1,128 256 "off $B X=1" "st $B QK_MEGAKERNEL_STAGED_UNTIL=256" "stf $B QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0"
pack
rounds 2 64,160,232 32 "w-off $B X=1" "w-st $B QK_MEGAKERNEL_STAGED_UNTIL=256" "w-stf $B QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0"
pack
echo "t=$(elapsed)"
