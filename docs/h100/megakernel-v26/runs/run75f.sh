#!/usr/bin/env bash
# Device run 75f (v26): sampled decode timed by `qk bench decode --seed 0` (the default draw: temperature 0.6, top-k
# 20, top-p 0.95; 9f461ea's bench flags) at positions 1/128/1024, 256 tokens, median of 3: main's build with the
# sampled screen, screened and unscreened (QK_MEGAKERNEL_SCREEN=0) in alternation with greedy, 3 rounds; then stage
# traces of sampled steps at position 20, screened and unscreened.
. "$(dirname "$0")/lib.sh"
run_setup r75f
# abs NAME ARGS… (then `--` ENV…): one round ($i) of the 0.6B bench, megakernel only, µs per position printed.
abs() {
  local v=$1 a=() e=(X=1); shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do a+=("$1"); shift; done
  [ "${1:-}" = "--" ] && { shift; e=("$@"); }
  env "${e[@]}" timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered "${a[@]}" --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(elapsed)"
}
for i in 1 2 3; do
  abs sampled --seed 0
  abs sampled0 --seed 0 -- QK_MEGAKERNEL_SCREEN=0
  abs greedy
done
pack
grep -m1 "Batch-1" $R/ab-sampled-1.md | cut -c1-120
for s in 1 0; do
  QK_MEGAKERNEL_SCREEN=$s QK_MEGAKERNEL_TRACE=$R/trace-s$s-p20.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 20 --tokens 32 --runs 1 --no-peers --no-layered --seed 0 > $R/trace-s$s-p20.log 2>&1; echo "trace sampled screen=$s rc=$? $(elapsed)"
done
xz -T4 $R/trace-*.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$R/gpu.txt" 2>&1
pack
echo "t=$(elapsed)"
