#!/usr/bin/env bash
# Device run 71c (v22: which half of run 71b's d7 costs the 40 µs). All 7 consumer warps, built in one build tree
# (with PTX), the same arithmetic: c20, v20's sources (804f1f8) rebuilt here (the baseline: v20's own addon was left
# out to fit the carry); L7, the workspace layout in the kernel parameters only; S7, the block's constant pointers in
# shared memory only (run 71b's d7 has both). Greedy ids of each; A/B, 3 rounds alternating, 0.6B at 1/128/512/1024; 32-token windows at 8/64, 2 rounds.
. "$(dirname "$0")/lib.sh"
run_setup r71c
candidates .device/cand.tar.xz
for n in c20 L7 S7; do candidate_node $n; done
for n in C20 L7 S7; do genw ${!n} greedy-$n.json 256 --engine megakernel --temperature 0; echo "greedy $n rc=$? $(ids $R/greedy-$n.json) (v9-v20: aa30529c)"; done
rounds 3 1,128,512,1024 256 "c20 $C20 X=1" "L7 $L7 X=1" "S7 $S7 X=1"
rounds 2 8,64 32 "w-c20 $C20 X=1" "w-L7 $L7 X=1" "w-S7 $S7 X=1"
echo "t=$(elapsed)"
