#!/usr/bin/env bash
# Device run 75e (v26): `samp2`, run 75c's build with the sampled screen's threshold found by ranks (a binary search
# per warp list, no serial merges) and its candidates requested from L2 first, then recomputed two rows at a time. The
# same steps as run 75c (GPU tests, ids, 1.7B sampled ids screened and unscreened, sampled decode speed screened and
# unscreened in alternation, greedy speed, synccheck and racecheck of a sampled decode).
. "$(dirname "$0")/lib.sh"
run_setup r75e
gpu_tests
pack
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy samp rc=$? $(ids $R/greedy.json) (main: aa30529c)"
ids_400_sampled samp $B
gen_ids 1.7b samp $B; echo "(v25: e2ce96aa)"
for s in 1 0; do
  QK_MEGAKERNEL_SCREEN=$s timeout 200 $N $B generate --preset 1.7b --engine megakernel --max-tokens 64 --json --seed 3 "Tell me about the sea" > "$R/sampled-1.7b-screen$s.json" 2>"$R/sampled-1.7b-screen$s.err"
  echo "sampled 1.7b screen=$s rc=$? $(ids $R/sampled-1.7b-screen$s.json) $(elapsed)"
done
pack
# sampled decode tok/s: NAME BUNDLE PROMPT ENV…
srate() {
  local v=$1 x=$2 pr=$3; shift 3
  env "$@" timeout 60 $N $x generate --preset 0.6b --engine megakernel --max-tokens 256 --json --seed 1 "$pr" > "$R/srate-$v-$i.json" 2>/dev/null
  echo "$v $i rc=$? $(grep -o '"decodeTokensPerSecond":[0-9.]*' $R/srate-$v-$i.json | cut -d: -f2) $(ids $R/srate-$v-$i.json)"
}
LONG=$(python3 -c "print(' '.join(['sea'] * 1000))")
for i in 1 2 3 4 5; do
  srate samp $B "Tell me about the sea" X=1; srate samp0 $B "Tell me about the sea" QK_MEGAKERNEL_SCREEN=0
done | tee $R/srate.txt
for i in 1 2 3; do
  srate samp-long $B "$LONG" X=1; srate samp0-long $B "$LONG" QK_MEGAKERNEL_SCREEN=0
done | tee -a $R/srate.txt
pack
rounds 3 1,128,1024 256 "samp $B X=1"
pack
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 120 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --seed 1 "hello" > $R/synccheck-sampled.txt 2>&1; echo "synccheck sampled rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck-sampled.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 170 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --seed 1 "hello" > $R/racecheck-sampled.txt 2>&1; echo "racecheck sampled rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-sampled.txt | head -3
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
