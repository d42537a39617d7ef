#!/usr/bin/env bash
# Device run 77a (v28): the staged attention (QK_MEGAKERNEL_STAGED_UNTIL=192: launches whose steps have 57-192 keys
# attend with one block per KV head over rows staged in shared memory, on the tensor cores). GPU tests (with the new
# test), greedy ids staged and off (main's bits off), 3 greedy repeats staged, sanitizers of a staged decode, then
# 3 alternating rounds at 1/128 and 2 rounds of 32-token windows at 8/64/120/160 (1, 2, 3 and 3-4 chunks off).
. "$(dirname "$0")/lib.sh"
run_setup r77a
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy.json) (main: aa30529c)"
for i in 1 2 3; do
  QK_MEGAKERNEL_STAGED_UNTIL=192 genw $B greedy-st$i.json 256 --engine megakernel --temperature 0; echo "greedy staged $i rc=$? $(ids $R/greedy-st$i.json)"
done
staged_sanitizers
pack
rounds 3 1,128 256 "off $B X=1" "st $B QK_MEGAKERNEL_STAGED_UNTIL=192"
pack
rounds 2 8,64,120,160 32 "w-off $B X=1" "w-st $B QK_MEGAKERNEL_STAGED_UNTIL=192"
pack
echo "t=$(elapsed)"
