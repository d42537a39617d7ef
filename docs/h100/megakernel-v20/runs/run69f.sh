#!/usr/bin/env bash
# Device run 69f (v20 candidate: flagged words and sync words loaded and stored at GPU scope, ld/st.relaxed.gpu,
# instead of ld/st.volatile, which is relaxed at system scope): GPU tests; ids; synccheck and racecheck on a 4-token
# decode; A/B against v19 (v19's addon, built from 1581699), 3 rounds alternating, 0.6B at positions 1/128/512/1024;
# 32-token windows.
. "$(dirname "$0")/lib.sh"
run_setup r69f baseline
gpu_tests
reference_ids
repeat_ids
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
for i in 1 2 3; do ab v19 1,128,512,1024 256 $O X=1; ab gpu 1,128,512,1024 256 $B X=1; done
for i in 1 2; do ab w-v19 8,64,120 32 $O X=1; ab w-gpu 8,64,120 32 $B X=1; done
echo "t=$(elapsed)"
