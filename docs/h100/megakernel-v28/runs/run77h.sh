#!/usr/bin/env bash
# Device run 77h (v28): the build to land (the staged attention behind QK_MEGAKERNEL_STAGED_UNTIL, off by default; with
# it on, HF's roundings as in run 77f). (Main's addon beside it did not fit the 64 MiB a call carries.) GPU tests;
# greedy ids off (main's bits) and staged (twice); 3 alternating rounds at 1/128 (off, staged to 256) and 2 rounds of
# windows at 64/160/232; synccheck and racecheck of a staged decode.
. "$(dirname "$0")/lib.sh"
run_setup r77h
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy.json) (main: aa30529c)"
for i in 1 2; do
  QK_MEGAKERNEL_STAGED_UNTIL=256 genw $B greedy-st$i.json 256 --engine megakernel --temperature 0; echo "greedy staged $i rc=$? $(ids $R/greedy-st$i.json)"
done
pack
rounds 3 1,128 256 "off $B X=1" "st $B QK_MEGAKERNEL_STAGED_UNTIL=256"
pack
rounds 2 64,160,232 32 "w-off $B X=1" "w-st $B QK_MEGAKERNEL_STAGED_UNTIL=256"
pack
staged_sanitizers
pack
echo "t=$(elapsed)"
