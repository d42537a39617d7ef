#!/usr/bin/env bash
# Device run 79n (v30): the build that lands (79k's kernels: the staged attention reworked, the same bits as v29).
# GPU tests, ids, 10 repeats, 1.7B ids, sanitizers of a decode staged over the whole ring, the 0.6B sweep; then what
# the HF agreement bar can measure at seeds 5 and 7 (HF sdpa and HF float32 against HF eager, and the megakernel
# against all three).
. "$(dirname "$0")/lib.sh"
run_setup r79n
gpu_tests
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v29: c3947782)"
ids_400_sampled land $B; echo "(v29: b924f925 / 24aa5aaf)"
gen_ids 1.7b land $B; echo "(v29: e2ce96aa)"
repeat_ids
pack
ring_sanitizers
pack
sweep06 1,128,512,1024,4096
pack
floor 5 7
pack
echo "t=$(elapsed)"
