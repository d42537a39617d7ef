#!/usr/bin/env bash
# Device run 69g (v20 final, aed9a85: sync and flagged words at GPU scope; its kernels' .text is byte-identical to run
# 69f's build): the 0.6B sweep with HF static + CUDA graph in the same run; the 8B sweep with HF static + CUDA graph;
# then two more A/B rounds against v19 (v19's addon, built from 1581699), numbered 4 and 5 after run 69f's three.
. "$(dirname "$0")/lib.sh"
run_setup r69g baseline
sweeps
for i in 4 5; do ab v19 1,128,512,1024 256 $O X=1; ab gpu 1,128,512,1024 256 $B X=1; done
echo "t=$(elapsed)"
