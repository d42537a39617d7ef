#!/usr/bin/env bash
# Device run 80c (v31): does the staged rows' HBM traffic cost less later in the layer? 3 alternating rounds at
# positions 1 and 128 of main (v29's kernels), the rework, and the rework with its row copies started 3 and 6 µs
# after the block reaches them (QK_MEGAKERNEL_STAGED_COPY_DELAY_NS); stage traces of main, the rework and the 3 µs
# delay at 140 and 260 keys. (The run spelled out main's traces; `trace` now takes
# TRACE_BUNDLE for them, the same command.)
. "$(dirname "$0")/lib.sh"
run_setup r80c baseline
rounds 3 1,128 256 "main $O X=1" "new $B X=1" "d3 $B QK_MEGAKERNEL_STAGED_COPY_DELAY_NS=3000" "d6 $B QK_MEGAKERNEL_STAGED_COPY_DELAY_NS=6000"
pack
for p in 140 260; do TRACE_BUNDLE=$O trace main-p$p $p X=1; done
traces "140 260" "new X=1" "d3 QK_MEGAKERNEL_STAGED_COPY_DELAY_NS=3000"
echo "t=$(elapsed)"
