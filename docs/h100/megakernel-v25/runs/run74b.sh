#!/usr/bin/env bash
# Device run 74b (v25): A/B of main (cand/main.node), the screened build with the screen off (scr0,
# QK_MEGAKERNEL_SCREEN=0: the same kernels plus the screen's unused code) and on (scr): alternating, 3 rounds at
# 1/128/512/1024 (256 tokens) and 2 rounds of 32-token windows at 8/64/120; 8B greedy ids of both builds (8B claims
# its tiles, so it runs unscreened).
. "$(dirname "$0")/lib.sh"
setup r74b
setup_scr
rounds 3 1,128,512,1024 256 "main $B X=1" "scr0 $S QK_MEGAKERNEL_SCREEN=0" "scr $S X=1"
rounds 2 8,64,120 32 "w-main $B X=1" "w-scr0 $S QK_MEGAKERNEL_SCREEN=0" "w-scr $S X=1"
gen_ids 8b main $B; gen_ids 8b scr $S
echo "t=$(elapsed)"
