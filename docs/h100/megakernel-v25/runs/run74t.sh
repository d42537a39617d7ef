#!/usr/bin/env bash
# Device run 74t (v25): where the screened LM head's time goes. Stage traces from position 20 (one step per launch,
# 32 tokens) of main, the screened build with the screen off (scr0) and on (scr); then scr at 1/128 with 3 and 4 LM-head
# copies in flight (QK_MEGAKERNEL_LM_INFLIGHT; the default is 2).
. "$(dirname "$0")/lib.sh"
setup r74t
setup_scr
trace20 main $B X=1; trace20 scr0 $S QK_MEGAKERNEL_SCREEN=0; trace20 scr $S X=1
xz -T4 $R/trace-*.json
i=1
ab scr 1,128 256 $S X=1
ab scr-lm3 1,128 256 $S QK_MEGAKERNEL_LM_INFLIGHT=3
ab scr-lm4 1,128 256 $S QK_MEGAKERNEL_LM_INFLIGHT=4
ab main 1,128 256 $B X=1
echo "t=$(elapsed)"
