#!/usr/bin/env bash
# Device run 71g (v22, main at 244dac1; the same machine as run 71f, warm): the 8B sweep of `sweeps` (megakernel, HF
# static cache + CUDA graph in the same run, positions 1-2048, 128 tokens) on a `qk model init` checkpoint.
. "$(dirname "$0")/lib.sh"
run_setup r71g
timeout 150 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
timeout 200 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
echo "t=$(elapsed)"
