#!/usr/bin/env bash
# Device run 79g (v30): 79e plus the V·P pass without per-tile checks (full groups of four tiles apart from the last),
# one 8-byte load per weight operand, no query-column masks: GPU tests, ids, alternating rounds against off, traces.
. "$(dirname "$0")/lib.sh"
run_setup r79g
gpu_tests
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v29: c3947782)"
genw $B greedy400.json 400 --engine megakernel --temperature 0; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v29: b924f925)"
genw $B sampled.json 256 --engine megakernel --seed 1; echo "sampled rc=$? $(ids $R/sampled.json) (v29: 24aa5aaf)"
QK_MEGAKERNEL_STAGED_HF=0 genw $B greedy-f.json 256 --engine megakernel --temperature 0; echo "greedy flash-style rc=$? $(ids $R/greedy-f.json) (v28 77d flash-style to 256: a63b8c31; v29 to 384: not recorded)"
pack
rounds 3 1,128 256 "off $B QK_MEGAKERNEL_STAGED_UNTIL=0" "new $B X=1"
pack
for p in 140 260; do
  QK_MEGAKERNEL_TRACE=$R/trace-new-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-new-p$p.log 2>&1; echo "trace $p rc=$? $(elapsed)"
done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
