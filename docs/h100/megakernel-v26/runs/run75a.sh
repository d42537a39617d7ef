#!/usr/bin/env bash
# Device run 75a (v26): the clean sweep of main (6e69bf4, v25's landed `scr3`) on a fresh machine, then the A/B of its
# screen (off/on) in 3 rounds at positions 1/128/1024; greedy ids first.
. "$(dirname "$0")/lib.sh"
run_setup r75a
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v12-v25: aa30529c)"
sweep06 1,128,512,1024,4096
pack
rounds 3 1,128,1024 256 "off $B QK_MEGAKERNEL_SCREEN=0" "on $B X=1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
