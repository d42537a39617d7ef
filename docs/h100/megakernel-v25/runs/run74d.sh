#!/usr/bin/env bash
# Device run 74d (v25): the screened LM head in its own kernel instantiation (scr2: the unscreened argmax kernel keeps
# main's code) against main and against run 74b's build (scr: the screen's code in the one argmax kernel). Greedy ids
# of scr2 screened and not; alternating, 3 rounds at 1/128/512/1024 of main, scr, scr2 and scr2 unscreened
# (QK_MEGAKERNEL_SCREEN=0), and 2 rounds of 32-token windows at 8/64/120.
. "$(dirname "$0")/lib.sh"
setup r74d
setup_scr
candidate_bundle() { rm -rf "/tmp/s-$1" && cp -r /tmp/s "/tmp/s-$1" && cp "/tmp/cand/cand/$1.node" "/tmp/s-$1/bundle/qk_cuda.node"; }
candidate_bundle scr2; S2=/tmp/s-scr2/bundle/qk.mjs
genw $S2 greedy-scr2.json 256 --engine megakernel --temperature 0; echo "greedy scr2 rc=$? $(ids $R/greedy-scr2.json) (main: aa30529c)"
(export QK_MEGAKERNEL_SCREEN=0; genw $S2 greedy-scr20.json 256 --engine megakernel --temperature 0; echo "greedy scr2 unscreened rc=$? $(ids $R/greedy-scr20.json) (main: aa30529c)")
rounds 3 1,128,512,1024 256 "main $B X=1" "scr $S X=1" "scr2 $S2 X=1" "scr20 $S2 QK_MEGAKERNEL_SCREEN=0"
rounds 2 8,64,120 32 "w-main $B X=1" "w-scr $S X=1" "w-scr2 $S2 X=1" "w-scr20 $S2 QK_MEGAKERNEL_SCREEN=0"
echo "t=$(elapsed)"
