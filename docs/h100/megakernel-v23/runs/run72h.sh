#!/usr/bin/env bash
# Device run 72h (v23): the 8B sweep of the landed build (455e745) with HF static cache + CUDA graph (positions
# 1-2048, 128 tokens, median of 3), on a `qk model init --preset 8b` checkpoint.
. docs/h100/megakernel-v22/runs/lib.sh
run_setup r72h
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
echo "t=$(elapsed)"
