#!/usr/bin/env bash
# Device run 69e (v20 end: the kernels are v19's, built from 1581699's sources): GPU tests; ids (10 greedy repeats,
# sampled, 400 tokens); the 0.6B sweep with HF static + CUDA graph in the same run; the 8B sweep with HF static + CUDA
# graph. (Shared steps in lib.sh; as run, they were written out in the script.)
. "$(dirname "$0")/lib.sh"
run_setup r69e
gpu_tests
reference_ids
repeat_ids
sweeps
echo "t=$(elapsed)"
