#!/usr/bin/env bash
# Device run 72c (v23): is w16's cost at one chunk (run 72a: 20-25 µs per token; run 72b: half of it in the
# gate/up -> down hop, which the attention does not touch) code placement? w16 built with the placement padding at the
# end of the attention at 336/536/736 (= w16)/936 instructions, against main. Greedy ids of each (all must be
# w16's 25222701: the padding never runs); A/B, 3 rounds at 1/128/512/1024 and 32-token windows at 8/64/120/232.
. "$(dirname "$0")/lib.sh"
setup r72c
for p in 336 536 936; do candidate_node w16p$p; done
candidate_node w16
for p in 336 536 936; do n=W16P$p; genw ${!n} greedy-w16p$p.json 256 --engine megakernel --temperature 0; echo "greedy w16p$p rc=$? $(ids $R/greedy-w16p$p.json) (w16: 25222701)"; done
rounds 3 1,128,512,1024 256 "main $B X=1" "w16 $W16 X=1" "w16p336 $W16P336 X=1" "w16p536 $W16P536 X=1" "w16p936 $W16P936 X=1"
rounds 3 8,64,120,232 32 "w-main $B X=1" "w-w16 $W16 X=1" "w-w16p336 $W16P336 X=1" "w-w16p536 $W16P536 X=1" "w-w16p936 $W16P936 X=1"
echo "t=$(elapsed)"
