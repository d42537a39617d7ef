#!/usr/bin/env bash
# Device run 77j (v28): the staged attention without its record's unused max (and its divisor computed only where the
# output is divided): GPU tests; greedy 256 tokens staged (run 77h's build: c3947782) and off (aa30529c), the same bits
# expected.
. "$(dirname "$0")/lib.sh"
run_setup r77j
gpu_tests
genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy.json) (main: aa30529c)"
QK_MEGAKERNEL_STAGED_UNTIL=256 genw $B greedy-st.json 256 --engine megakernel --temperature 0; echo "greedy staged rc=$? $(ids $R/greedy-st.json) (77h: c3947782)"
QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_HF=0 genw $B greedy-stf.json 256 --engine megakernel --temperature 0; echo "greedy staged flash-style rc=$? $(ids $R/greedy-stf.json)"
pack
echo "t=$(elapsed)"
