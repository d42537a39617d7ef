#!/usr/bin/env bash
# Device run 75b (v26): the checks of main (6e69bf4) for the closing note, on one machine: GPU tests, 10 greedy
# repeats, 400 greedy and sampled, 1.7B and 8B greedy ids, synccheck and racecheck; stage traces from positions 20,
# 140 and 260 (1, 3 and 5 chunks per head); the 8B sweep (v20's `sweeps`, second half). Packed after each part.
. "$(dirname "$0")/lib.sh"
run_setup r75b
gpu_tests
pack
repeat_ids
ids_400_sampled main $B
gen_ids 1.7b main $B; echo "(v25: e2ce96aa)"
gen_ids 8b main $B; echo "(v25: bd48e8a3)"
pack
sanitizers_in $B main
pack
trace_at() {
  env QK_MEGAKERNEL_TRACE=$R/trace-p$1.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $1 --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-p$1.log 2>&1; echo "trace p$1 rc=$? $(elapsed)"
}
trace_at 20; trace_at 140; trace_at 260
xz -T4 $R/trace-*.json
pack
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
