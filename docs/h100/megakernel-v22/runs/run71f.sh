#!/usr/bin/env bash
# Device run 71f (v22, main at 244dac1): the 0.6B sweep of `sweeps` (layered and megakernel, HF static cache + CUDA
# graph in the same run, positions 1-4096, 256 tokens) on a `qk model init` checkpoint. (The 8B sweep was left out for
# the device time left; run 71e has 8B at 1/1024 against v20.)
. "$(dirname "$0")/lib.sh"
run_setup r71f
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
echo "t=$(elapsed)"
