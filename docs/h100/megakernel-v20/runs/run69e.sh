#!/usr/bin/env bash
# Device run 69e (v20 end: the kernels are v19's, built from 1581699's sources): GPU tests; ids (10 greedy repeats,
# sampled, 400 tokens); the 0.6B sweep with HF static + CUDA graph in the same run; the 8B sweep with HF static + CUDA
# graph. (Shared steps in lib.sh; as run, they were written out in the script.)
. "$(dirname "$0")/lib.sh"
run_setup r69e
gpu_tests
reference_ids
repeat_ids
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
rm -rf /tmp/ref06
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
echo "t=$(elapsed)"
