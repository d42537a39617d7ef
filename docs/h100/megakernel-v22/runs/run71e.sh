#!/usr/bin/env bash
# Device run 71e (v22, the landed change at 244dac1: the workspace layout read from the kernel parameters): GPU tests;
# the reference ids and 10 greedy repeats; synccheck and racecheck on a 4-token decode; A/B against v20 (804f1f8's
# addon), 3 rounds alternating, 0.6B at 1/128/512/1024; 32-token windows at 8/64/120/232, 2 rounds; 8B at 1/1024 once
# each. (The sanitizer lines were folded into lib.sh's `sanitizers` after the run: a stub `timeout` logs the same
# commands.)
. "$(dirname "$0")/lib.sh"
run_setup r71e baseline
gpu_tests
reference_ids
repeat_ids
sanitizers
rounds 3 1,128,512,1024 256 "v20 $O X=1" "main $B X=1"
rounds 2 8,64,120,232 32 "w-v20 $O X=1" "w-main $B X=1"
i=1; ab8 v20 $O X=1; ab8 main $B X=1
echo "t=$(elapsed)"
