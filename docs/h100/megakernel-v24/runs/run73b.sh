#!/usr/bin/env bash
# Device run 73b (v24): run 73a's norm in registers lost 15-25 µs per token at 1 and 128. Where it issued the gather
# before the barrier behind the previous stage, nrm2 issues it after that barrier (as main does), with the same number
# of barriers as nrm (3; the ok check folded into the sum's barrier). nrm4: nrm2 with x scaled from the residual in
# shared memory (as main) rather than from registers held across the barrier. att: main + only the attention's per-warp
# q/k/v check (na's attention change). na2: nrm2 + att. Greedy ids (main's aa30529c) on all; GPU tests on na2; A/B 3
# rounds at 1/128/512/1024 and 2 rounds of 32-token windows at 8/64/120; traces of main and nrm2 at position 20.
. "$(dirname "$0")/lib.sh"
setup r73b
for v in nrm2 nrm4 att na2; do candidate_node $v; done
gpu_tests_in NA2
for v in nrm2 nrm4 att na2; do X=${v^^}; genw ${!X} greedy-$v.json 256 --engine megakernel --temperature 0; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (main: aa30529c)"; done
rounds 3 1,128,512,1024 256 "main $B X=1" "nrm2 $NRM2 X=1" "nrm4 $NRM4 X=1" "att $ATT X=1" "na2 $NA2 X=1"
rounds 2 8,64,120 32 "w-main $B X=1" "w-nrm2 $NRM2 X=1" "w-nrm4 $NRM4 X=1" "w-att $ATT X=1" "w-na2 $NA2 X=1"
trace20 main $B X=1; trace20 nrm2 $NRM2 X=1; trace20 att $ATT X=1
xz -T4 $R/trace-*.json
echo "t=$(elapsed)"
