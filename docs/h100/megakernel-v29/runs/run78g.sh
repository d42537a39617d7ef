#!/usr/bin/env bash
# Device run 78g (v29): the build to land (the staged attention over the whole ring, HF's roundings, on by default for
# 57-384 keys). GPU tests; greedy 256 and 400 tokens, sampled 256 (seed 1), 1.7B greedy 32; synccheck and racecheck
# of a staged 4-token decode (from position 1); then the 0.6B sweep with HF static + graph and the layered engine.
. "$(dirname "$0")/lib.sh"
run_setup r78g
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (78a-d, staged to 384: c3947782; v26-v28 main: aa30529c)"
ids_400_sampled land $B
gen_ids 1.7b land $B; echo "(v25-v28: e2ce96aa)"
pack
ring_sanitizers
pack
sweep06 1,128,512,1024,4096
pack
echo "t=$(elapsed)"
