#!/usr/bin/env bash
# Device run 73e (v24): runs 73a-c made polls that start earlier slower. Do the polls that wait long cost the hop
# they wait for? The O input's gather waits through QKV's slowest block, the q/k/v hop, the attention and its hop
# (about 3.2 µs per layer at one chunk), all that time re-polling lines the attention blocks are about to write. od:
# main + QK_MEGAKERNEL_O_POLL_DELAY_NS (a knob of this build): each block that gathers the O input spins on the
# global timer that many ns before its first poll. Knob 0 is main's behaviour in od's code placement. Greedy ids at
# 0 and 1500 (main's aa30529c); A/B 3 rounds at 1/128/512/1024 and 2 rounds of windows at 8/64/120, main and od at
# 0/500/1000/1500/2500; traces of od at 0 and 1500 at position 20.
. "$(dirname "$0")/lib.sh"
setup r73e
candidate_node od
for k in 0 1500; do QK_MEGAKERNEL_O_POLL_DELAY_NS=$k genw $OD greedy-od$k.json 256 --engine megakernel --temperature 0; echo "greedy od $k rc=$? $(ids $R/greedy-od$k.json) (main: aa30529c)"; done
rounds 3 1,128,512,1024 256 "main $B X=1" "od0 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=0" "od500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=500" "od1000 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=1000" "od1500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=1500" "od2500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=2500"
rounds 2 8,64,120 32 "w-main $B X=1" "w-od0 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=0" "w-od500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=500" "w-od1000 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=1000" "w-od1500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=1500" "w-od2500 $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=2500"
for k in 0 1500; do trace20 od$k $OD QK_MEGAKERNEL_O_POLL_DELAY_NS=$k; done
xz -T4 $R/trace-*.json
echo "t=$(elapsed)"
