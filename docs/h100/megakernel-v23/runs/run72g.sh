#!/usr/bin/env bash
# Device run 72g (v23): the landed build (455e745, the bundle): GPU tests, the reference ids and 10 greedy repeats,
# synccheck and racecheck on a 4-token decode, and the 0.6B sweep with HF static cache + CUDA graph and the layered
# engine (positions 1-4096, 256 tokens, median of 3).
. docs/h100/megakernel-v22/runs/lib.sh
run_setup r72g
gpu_tests
gen greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v9-v22: aa30529c)"
reference_ids
repeat_ids
sanitizers
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
echo "t=$(elapsed)"
