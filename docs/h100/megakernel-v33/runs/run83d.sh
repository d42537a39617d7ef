#!/usr/bin/env bash
# Device run 83d (v33, closing): the 8B sweep of the issue again, with the hand-offs of run 83c (8B now stays in the
# megakernel up to 6,400): positions 1, 128, 512, 1024 and 4096, 256 tokens, median of 3, HF static cache + CUDA graph
# and the layered engine in the same invocation; then the megakernel alone against the layered engine at 8,192 (83c
# ran out of time there). The log also goes to $OUT/log-r83d.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83d
{
sweep8b 1,128,512,1024,4096
pack
env QK_MEGAKERNEL_UNTIL=1000000 timeout 200 $N $B bench decode --model /tmp/ref8 --engines layered,megakernel --no-peers --positions 8192 --tokens 256 --runs 3 --markdown $R/handoff-8b.md > $R/handoff-8b.log 2>&1; echo "hand-off 8b rc=$? $(elapsed)"
grep -E "^\| (layered|megakernel)" $R/handoff-8b.md
grep "decode .* position" $R/handoff-8b.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83d.txt
