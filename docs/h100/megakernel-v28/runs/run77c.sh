#!/usr/bin/env bash
# Device run 77c (v28): the staged attention's blocks take no gate/up rows (their ring is short while the staged rows
# hold the rest of it; run 77b's traces put +0.5-0.8 µs per layer in their gate/up stage). GPU tests; stage traces at
# positions 20 (staged from 1) and 80; 3 alternating rounds at 1/128 (off, staged, staged with gate/up rows as 77a);
# 2 rounds of 32-token windows at 8/64/120/160.
. "$(dirname "$0")/lib.sh"
run_setup r77c
gpu_tests
pack
trace_v() {  # NAME POSITION ENV…
  local v=$1 p=$2; shift 2
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$v-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p$p.log 2>&1; echo "trace $v p$p rc=$? $(elapsed)"
}
trace_v st 20 QK_MEGAKERNEL_STAGED_UNTIL=192 QK_MEGAKERNEL_STAGED_FROM=1
trace_v st 80 QK_MEGAKERNEL_STAGED_UNTIL=192
trace_v st 176 QK_MEGAKERNEL_STAGED_UNTIL=192
for f in $R/trace-*.json; do
  echo "== $(basename $f)"; python3 docs/h100/megakernel-v11/critical_path.py $f --attention-blocks 8 2>&1 | tail -12
done
xz -T4 $R/trace-*.json
pack
rounds 3 1,128 256 "off $B X=1" "st $B QK_MEGAKERNEL_STAGED_UNTIL=192" "stgu $B QK_MEGAKERNEL_STAGED_UNTIL=192 QK_MEGAKERNEL_STAGED_GATE_UP=1"
pack
rounds 2 8,64,120,160 32 "w-off $B X=1" "w-st $B QK_MEGAKERNEL_STAGED_UNTIL=192" "w-st1 $B QK_MEGAKERNEL_STAGED_UNTIL=192 QK_MEGAKERNEL_STAGED_FROM=1"
pack
echo "t=$(elapsed)"
