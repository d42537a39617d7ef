#!/usr/bin/env bash
# Device run 70a (v21 candidate: the O projection split by KV head, QK_MEGAKERNEL_O_SPLIT=N): GPU tests (with the
# split's own test); the default ids (unchanged code path); greedy ids with the split on, three times; A/B against v20
# (804f1f8's addon), 3 rounds alternating, 0.6B at positions 1/128/512/1024 with the split off, on up to 3 chunks, up to
# 8 and up to 16; 32-token windows of 1, 2, 3 and 5 chunks per head, 2 rounds.
. "$(dirname "$0")/lib.sh"
run_setup r70a baseline
gpu_tests
reference_ids
gen greedy-off.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy-off.json) (v9-v20: aa30529c)"
for k in 1 2 3; do QK_MEGAKERNEL_O_SPLIT=16 gen greedy-split-$k.json 256 --engine megakernel --temperature 0; echo "greedy split16 rc=$? $(ids $R/greedy-split-$k.json)"; done
QK_MEGAKERNEL_O_SPLIT=16 gen sampled-split.json 256 --engine megakernel --seed 1; echo "sampled split16 rc=$? $(ids $R/sampled-split.json)"
rounds 3 1,128,512,1024 256 "v20 $O X=1" "off $B X=1" "s3 $B QK_MEGAKERNEL_O_SPLIT=3" "s8 $B QK_MEGAKERNEL_O_SPLIT=8" \
  "s16 $B QK_MEGAKERNEL_O_SPLIT=16"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-off $B X=1" "w-s16 $B QK_MEGAKERNEL_O_SPLIT=16"
echo "t=$(elapsed)"
