#!/usr/bin/env bash
# Device run 73c (v24): run 73b put nrm2 (the norm's gather after the barrier, 128 threads taking 32 bytes each) 24 µs
# per token behind nrm (the same, issued before the barrier). eg: main's gather layout (thread t: units t, t + 224, …)
# and main's arithmetic, but the norm inputs' words waited for in registers before the barrier behind the previous
# stage, stored after it (the same barriers as main). eg2: eg + the same for the O and down inputs (up to 5,376
# values). Greedy ids (main's aa30529c) on both; GPU tests on eg2; A/B 3 rounds at 1/128/512/1024 and 2 rounds of
# 32-token windows at 8/64/120; traces of main, eg, eg2 at position 20.
. "$(dirname "$0")/lib.sh"
setup r73c
for v in eg eg2; do candidate_node $v; done
gpu_tests_in EG2
for v in eg eg2; do X=${v^^}; genw ${!X} greedy-$v.json 256 --engine megakernel --temperature 0; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (main: aa30529c)"; done
rounds 3 1,128,512,1024 256 "main $B X=1" "eg $EG X=1" "eg2 $EG2 X=1"
rounds 2 8,64,120 32 "w-main $B X=1" "w-eg $EG X=1" "w-eg2 $EG2 X=1"
trace20 main $B X=1; trace20 eg $EG X=1; trace20 eg2 $EG2 X=1
xz -T4 $R/trace-*.json
echo "t=$(elapsed)"
