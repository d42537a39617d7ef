#!/usr/bin/env bash
# Device run 83c (v33): the hand-off positions measured again. Run 83a's 8B 4096 row was the layered graph (the
# megakernel engine hands 8B off at 2,176, a v10 measurement). Here the megakernel alone (QK_MEGAKERNEL_UNTIL past
# every position) against the layered engine, presets with random weights, 256 tokens, median of 3, around and past
# each shape's current hand-off. The log also goes to $OUT/log-r83c.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83c
ho() {  # PRESET POSITIONS
  env QK_MEGAKERNEL_UNTIL=1000000 timeout 200 $N $B bench decode --preset $1 --engines layered,megakernel --no-peers --positions $2 --tokens 256 --runs 3 --markdown $R/handoff-$1.md > $R/handoff-$1.log 2>&1; echo "hand-off $1 rc=$? $(elapsed)"
  grep -E "^\| (layered|megakernel)" $R/handoff-$1.md
}
{
ho 8b 2048,3072,4096,6144,8192
pack
ho 4b 1024,2048,3072,4096,8192
pack
ho 1.7b 3072,4096,6144,8192
pack
ho 0.6b 4096,6144,8192
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83c.txt
