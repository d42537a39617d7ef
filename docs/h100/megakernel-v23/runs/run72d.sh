#!/usr/bin/env bash
# Device run 72d (v23): run 72c found 20 µs per token between placement paddings of one kernel (w16 at 336 against 736
# instructions). main's padding (736) was last searched in v15 (run 64e), seven versions ago. main built with the
# padding at 336/536/936/1136 instructions (mp*), against main (736, the bundle's addon). Greedy ids of each (all must
# be main's aa30529c: the padding never runs); A/B, 3 rounds at 1/128/512/1024 and 32-token windows at 8/64/120/232.
. "$(dirname "$0")/lib.sh"
setup r72d
for p in 336 536 936 1136; do candidate_node mp$p; n=MP$p; genw ${!n} greedy-mp$p.json 256 --engine megakernel --temperature 0; echo "greedy mp$p rc=$? $(ids $R/greedy-mp$p.json) (main: aa30529c)"; done
rounds 3 1,128,512,1024 256 "main $B X=1" "mp336 $MP336 X=1" "mp536 $MP536 X=1" "mp936 $MP936 X=1" "mp1136 $MP1136 X=1"
rounds 3 8,64,120,232 32 "w-main $B X=1" "w-mp336 $MP336 X=1" "w-mp536 $MP536 X=1" "w-mp936 $MP936 X=1" "w-mp1136 $MP1136 X=1"
echo "t=$(elapsed)"
