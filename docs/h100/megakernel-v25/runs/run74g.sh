#!/usr/bin/env bash
# Device run 74g (v25): the placement padding of the screened argmax kernel only (QK_SCREEN_PAD: the never-run
# instructions at the end of its attention; 736 in every kernel so far). scr2 unscreened (QK_MEGAKERNEL_SCREEN=0: main's
# speed in run 74d; main's own addon and the 536 and 936 builds did not fit the carry), scr2 (736), and 336 (built
# without PTX), alternating, 4 rounds at 1/128/512/1024 and 2 rounds of 32-token windows at 8/64/120; greedy ids.
. "$(dirname "$0")/lib.sh"
run_setup r74g
candidates .device/cand.tar.xz
setup_scr scr2
candidate_bundle() { rm -rf "/tmp/s-$1" && cp -r /tmp/s "/tmp/s-$1" && cp "/tmp/cand/cand/$1.node" "/tmp/s-$1/bundle/qk_cuda.node"; }
for p in 336; do candidate_bundle pad$p; done
P336=/tmp/s-pad336/bundle/qk.mjs
for v in P336; do genw ${!v} greedy-$v.json 256 --engine megakernel --temperature 0; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (main: aa30529c)"; done
rounds 4 1,128,512,1024 256 "scr20 $S QK_MEGAKERNEL_SCREEN=0" "scr2 $S X=1" "p336 $P336 X=1"
rounds 2 8,64,120 32 "w-scr20 $S QK_MEGAKERNEL_SCREEN=0" "w-scr2 $S X=1" "w-p336 $P336 X=1"
echo "t=$(elapsed)"
