#!/usr/bin/env bash
# Device run 69a (v20 candidate: the GEMV dots on the tensor cores, mma_pair): GPU tests; ids (10 greedy repeats,
# sampled, 400 tokens); A/B against v19 (v19's addon, built from 1581699, carried as .device/v19.node.xz), 3 rounds alternating, 0.6B
# at positions 1/128/512/1024; 8B at 1/1024, one round; 32-token windows at 1 and 2 chunks per head.
# (Shared steps in lib.sh; as run, they were written out in each script.)
. "$(dirname "$0")/lib.sh"
run_setup r69a baseline
gpu_tests
reference_ids
gen layered.json 256 --engine layered --temperature 0; echo "layered greedy rc=$? $(ids $R/layered.json)"
repeat_ids
echo "ids t=$(elapsed)"
for i in 1 2 3; do ab v19 1,128,512,1024 256 $O X=1; ab mma 1,128,512,1024 256 $B X=1; done
for i in 1 2; do ab w-v19 8,64,120 32 $O X=1; ab w-mma 8,64,120 32 $B X=1; done
ab8 v19 $O X=1; ab8 mma $B X=1
echo "t=$(elapsed)"
