#!/usr/bin/env bash
# Device run 82c (v33): the build that lands (the keys-split staged attention; the kernel with both paths padded 1,280
# after the attention): GPU tests, ids (greedy 256 and 400, sampled 256, 1.7B greedy 32), 10 greedy repeats, the 0.6B
# sweep with HF static cache + CUDA graph and the layered engine, then 2 alternating rounds against v32's landed build
# at positions 1, 128, 512 and 1024. The log also goes to $OUT/log-r82c.txt.
. "$(dirname "$0")/lib.sh"
run_setup r82c baseline
{
gpu_tests
path_ids land $B X=1
gen_ids 1.7b land $B
repeat_ids
pack
sweep06 1,128,512,1024,4096
pack
rounds 2 1,128,512,1024 256 "v32 $O X=1" "land $B X=1"
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r82c.txt
