#!/usr/bin/env bash
# Device run 77b (v28): is the staged attention taken, and what does it cost? The GPU tests (the staged test now also
# asserts that the staged steps' bits differ from the chunked ones); stage traces (one step per launch, 32 tokens) at
# position 20 (1 chunk off; staged with QK_MEGAKERNEL_STAGED_FROM=1) and 80 (2 chunks off; staged).
. "$(dirname "$0")/lib.sh"
run_setup r77b
gpu_tests
pack
trace_v() {  # NAME POSITION ENV…
  local v=$1 p=$2; shift 2
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$v-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p$p.log 2>&1; echo "trace $v p$p rc=$? $(elapsed)"
}
trace_v off 20 X=1; trace_v st 20 QK_MEGAKERNEL_STAGED_UNTIL=192 QK_MEGAKERNEL_STAGED_FROM=1
trace_v off 80 X=1; trace_v st 80 QK_MEGAKERNEL_STAGED_UNTIL=192
for f in $R/trace-*.json; do
  n=8; case $f in *off-p80*) n=16;; esac
  echo "== $(basename $f) (attention blocks $n)"; python3 docs/h100/megakernel-v11/critical_path.py $f --attention-blocks $n 2>&1 | tail -16
done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
