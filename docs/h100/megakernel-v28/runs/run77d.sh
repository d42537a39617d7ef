#!/usr/bin/env bash
# Device run 77d (v28): the staged attention up to 256 keys (one block per KV head; its blocks keep 2 of the short
# ring's 7 slots). GPU tests; greedy ids off (main's bits) and staged (twice: repeats); 3 alternating rounds at 1/128
# (off, staged to 192, staged to 256) and 2 rounds of 32-token windows at 64/120/160/200/232.
. "$(dirname "$0")/lib.sh"
run_setup r77d
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy.json) (main: aa30529c)"
for i in 1 2; do
  QK_MEGAKERNEL_STAGED_UNTIL=256 genw $B greedy-st$i.json 256 --engine megakernel --temperature 0; echo "greedy staged $i rc=$? $(ids $R/greedy-st$i.json)"
done
QK_MEGAKERNEL_STAGED_UNTIL=256 genw $B sampled-st.json 256 --engine megakernel --seed 1; echo "sampled staged rc=$? $(ids $R/sampled-st.json) (main: dc211a68)"
pack
rounds 3 1,128 256 "off $B X=1" "st192 $B QK_MEGAKERNEL_STAGED_UNTIL=192" "st256 $B QK_MEGAKERNEL_STAGED_UNTIL=256"
pack
rounds 2 64,120,160,200,232 32 "w-off $B X=1" "w-st256 $B QK_MEGAKERNEL_STAGED_UNTIL=256"
pack
echo "t=$(elapsed)"
