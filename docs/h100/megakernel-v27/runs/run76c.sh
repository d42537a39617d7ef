#!/usr/bin/env bash
# Device run 76c (v27): the landing candidate, ungrouped attention at 57-112 keys by default. GPU tests; ids (greedy
# 256 ×10, 400 greedy, sampled, 1.7B and 8B greedy, 1.7B sampled); HF agreement over seeds 0-3, ungrouped and grouped.
. "$(dirname "$0")/lib.sh"
run_setup r76c
gpu_tests
pack
repeat_ids
ids_400_sampled ug $B
gen_ids 1.7b ug $B; echo "(v25: e2ce96aa)"
gen_ids 8b ug $B; echo "(v25: bd48e8a3)"
timeout 200 $N $B generate --preset 1.7b --engine megakernel --max-tokens 64 --json --seed 3 "Tell me about the sea" > "$R/sampled-1.7b.json" 2>"$R/sampled-1.7b.err"; echo "sampled 1.7b rc=$? $(ids $R/sampled-1.7b.json) (v26: 880c8b49) $(elapsed)"
pack
agreement 0 1 2 3
pack
echo "t=$(elapsed)"
