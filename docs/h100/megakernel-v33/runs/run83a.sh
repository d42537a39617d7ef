#!/usr/bin/env bash
# Device run 83a (v33, closing): the 8B sweep the issue asks for on the landed build (b52cd45, addon of 8f25e62):
# positions 1, 128, 512, 1024 and 4096, 256 tokens, median of 3, with HF static cache + CUDA graph and the layered
# engine measured in the same invocation; then the 8B greedy ids (32 tokens) if time is left. The log also goes to
# $OUT/log-r83a.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83a
{
sweep8b 1,128,512,1024,4096
pack
rm -rf /tmp/ref8
if [ "$(( $(date +%s) - START ))" -lt 470 ]; then gen_ids 8b land $B; echo "(v26 75b: see docs/h100/megakernel-v26/runs/r75b/greedy-8b-main.json)"; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83a.txt
