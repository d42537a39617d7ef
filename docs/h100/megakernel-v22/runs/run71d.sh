#!/usr/bin/env bash
# Device run 71d (v22: v20's "second round of polls in flight", now with a full batch per round). st: the layout in
# the kernel parameters (run 71c's L7), which leaves the registers for it, and input gathers that keep two rounds of
# polls in flight, the second QK_MEGAKERNEL_POLL_STAGGER cycles behind the first (0: off; the same bits either way).
# GPU tests and ids with the knob at 500; A/B against v20 and L7, 3 rounds alternating, 0.6B at 1/128/512/1024, the
# knob at 0/300/500/800; 32-token windows at 8/64, 2 rounds; 8B at 1/1024 once (v20, st 500).
. "$(dirname "$0")/lib.sh"
run_setup r71d baseline
candidates .device/cand.tar.xz
candidate_node st
candidate_node L7
export QK_MEGAKERNEL_POLL_STAGGER=500
gpu_tests_in ST
for k in 1 2; do genw $ST greedy-st500-$k.json 256 --engine megakernel --temperature 0; echo "greedy st500 $k rc=$? $(ids $R/greedy-st500-$k.json) (v9-v20: aa30529c)"; done
genw $ST greedy400-st500.json 400 --engine megakernel --temperature 0; echo "greedy 400 st500 rc=$? $(ids $R/greedy400-st500.json) (v12-v20: d7460a19)"
genw $ST sampled-st500.json 256 --engine megakernel --seed 1; echo "sampled st500 rc=$? $(ids $R/sampled-st500.json) (v10-v20: dc211a68)"
unset QK_MEGAKERNEL_POLL_STAGGER
rounds 3 1,128,512,1024 256 "v20 $O X=1" "L7 $L7 X=1" "st0 $ST X=1" "st300 $ST QK_MEGAKERNEL_POLL_STAGGER=300" \
  "st500 $ST QK_MEGAKERNEL_POLL_STAGGER=500" "st800 $ST QK_MEGAKERNEL_POLL_STAGGER=800"
rounds 2 8,64 32 "w-v20 $O X=1" "w-st0 $ST X=1" "w-st500 $ST QK_MEGAKERNEL_POLL_STAGGER=500"
i=1; ab8 v20 $O X=1; ab8 st500 $ST QK_MEGAKERNEL_POLL_STAGGER=500
echo "t=$(elapsed)"
