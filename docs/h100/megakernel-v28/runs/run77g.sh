#!/usr/bin/env bash
# Device run 77g (v28): the staged attention with HF's roundings, its weights normalised without a second barrier
# (every warp sums all the weights in one order; ex2.approx and one reciprocal). GPU tests; HF agreement off and staged
# (seeds 0-3); 3 alternating rounds at 1/128 (off, staged HF, staged flash-style); 2 rounds of windows at 64/160/232.
. "$(dirname "$0")/lib.sh"
run_setup r77g
gpu_tests
pack
P=/tmp/b/bundle/peers/hf_reference.py
for s in 0 1 2 3; do
  (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
  QK_MEGAKERNEL_STAGED_UNTIL=256 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-st.json > $R/cmp-seed$s-st.md 2>&1; echo "compare seed $s staged hf rc=$? $(tail -1 $R/cmp-seed$s-st.md)"
  pack
done
rounds 3 1,128 256 "off $B X=1" "st $B QK_MEGAKERNEL_STAGED_UNTIL=256" "stf $B QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0"
pack
rounds 2 64,160,232 32 "w-off $B X=1" "w-st $B QK_MEGAKERNEL_STAGED_UNTIL=256" "w-stf $B QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0"
pack
echo "t=$(elapsed)"
