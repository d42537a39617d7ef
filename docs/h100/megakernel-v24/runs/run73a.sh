#!/usr/bin/env bash
# Device run 73a (v24): three candidates against main (96be8b8's kernels, cand/main.node), all meant to give main's
# bits. nrm: the RMSNorm inputs (QKV, gate/up, final norm) gathered into registers, the gather issued before the
# barrier that waits for the previous stage's readers, two barriers fewer per norm. na: nrm + the attention's q/k/v
# gather checked per warp (each warp normalises the head it gathered), its block barrier folded into the one after the
# RoPE. nap: na + the producer asking L2 for its next tile whenever it finds the ring full (QK_MK_L2_AHEAD, a build
# flag of this run only). GPU tests on na and nap; greedy ids (main's aa30529c) on all; 400 greedy and sampled on na;
# 1.7B and 8B greedy ids, main against na; A/B 3 rounds at 1/128/512/1024 and 2 rounds of 32-token windows at
# 8/64/120; 8B at 1/1024 for main and na.
. "$(dirname "$0")/lib.sh"
setup r73a
candidate_node nrm
candidate_node na
candidate_node nap
gpu_tests_in NA
gpu_tests_in NAP
for v in nrm na nap; do X=${v^^}; genw ${!X} greedy-$v.json 256 --engine megakernel --temperature 0; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (main: aa30529c)"; done
ids_400_sampled na $NA
for p in 1.7b 8b; do gen_ids $p main $B; gen_ids $p na $NA; done
rounds 3 1,128,512,1024 256 "main $B X=1" "nrm $NRM X=1" "na $NA X=1" "nap $NAP X=1"
rounds 2 8,64,120 32 "w-main $B X=1" "w-nrm $NRM X=1" "w-na $NA X=1" "w-nap $NAP X=1"
i=1; ab8 main $B X=1; ab8 na $NA X=1

trace20 main $B X=1; trace20 na $NA X=1
xz -T4 $R/trace-*.json
echo "t=$(elapsed)"
