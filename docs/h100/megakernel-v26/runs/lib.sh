# Shared steps of the v26 device runs: v25's (runs/lib.sh, which sources v20-v24's). `run_setup NAME` unpacks
# .device/bundle.tar.xz, the bundle of main with its addon, as $B. New: `pack`, the results so far into $OUT (a call
# that runs past its limit still returns them); `sweep06 POSITIONS`, the 0.6B sweep of $B (v20's `sweeps`, first half).
# `sampled_screen_run`, runs 75c and 75e (after run_setup): GPU tests, ids, 1.7B sampled ids screened and
# unscreened, sampled decode speed screened and unscreened in alternation, greedy speed, sanitizers of a sampled decode.
# Sourced by run75*.sh from the repository root.
. docs/h100/megakernel-v25/runs/lib.sh
pack() { tar -czf "$OUT/$(basename "$R").tgz" -C /tmp "$(basename "$R")"; }
sweep06() {
  timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
  timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions "$1" --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
  grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
}
# sampled decode tok/s of one round $i, from `generate --json`: NAME BUNDLE PROMPT ENV…
srate() {
  local v=$1 x=$2 pr=$3; shift 3
  env "$@" timeout 60 $N $x generate --preset 0.6b --engine megakernel --max-tokens 256 --json --seed 1 "$pr" > "$R/srate-$v-$i.json" 2>/dev/null
  echo "$v $i rc=$? $(grep -o '"decodeTokensPerSecond":[0-9.]*' $R/srate-$v-$i.json | cut -d: -f2) $(ids $R/srate-$v-$i.json)"
}
sampled_screen_run() {
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
}
