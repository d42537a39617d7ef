#!/usr/bin/env bash
# Device run 73d (v24): main as it lands (the kernels of 455e745/96be8b8, cand/main.node), with v24's new GPU test
# (hidden sizes whose RMSNorm takes two and three groups per thread). GPU tests; 10 greedy repeats (aa30529c), 400
# greedy and sampled; synccheck and racecheck; the 0.6B and 8B sweeps with HF static + CUDA graph in the same run.
. "$(dirname "$0")/lib.sh"
setup r73d
gpu_tests
repeat_ids
ids_400_sampled main $B
sanitizers
sweeps
echo "t=$(elapsed)"
