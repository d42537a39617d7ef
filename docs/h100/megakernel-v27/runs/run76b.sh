#!/usr/bin/env bash
# Device run 76b (v27): the same build as 76a with two more knobs. QK_MEGAKERNEL_SKIP_O=0: the attending blocks of a
# short context take O rows (they still skip QKV rows, and read the residual for the O epilogue after attending).
# QK_MEGAKERNEL_UNGROUP=112 with QK_MEGAKERNEL_UNGROUP_FROM=56: ungrouped only where that makes one chunk of two.
# GPU tests with SKIP_O=0; greedy ids (SKIP_O=0 must keep main's); 3 alternating rounds at 1/128/512 and 2 of 32-token
# windows.
. "$(dirname "$0")/lib.sh"
run_setup r76b
gpu_tests_env skipo QK_MEGAKERNEL_SKIP_O=0
pack
QK_MEGAKERNEL_SKIP_O=0 genw $B greedy-skipo.json 256 --engine megakernel --temperature 0; echo "greedy skipo rc=$? $(ids $R/greedy-skipo.json) (main: aa30529c)"
QK_MEGAKERNEL_SKIP_O=0 genw $B greedy400-skipo.json 400 --engine megakernel --temperature 0; echo "greedy 400 skipo rc=$? $(ids $R/greedy400-skipo.json) (main: d7460a19)"
QK_MEGAKERNEL_SKIP_O=0 genw $B sampled-skipo.json 256 --engine megakernel --seed 1; echo "sampled skipo rc=$? $(ids $R/sampled-skipo.json) (main: dc211a68)"
pack
rounds 3 1,128,512 256 "off $B X=1" "skipo $B QK_MEGAKERNEL_SKIP_O=0" "ug1 $B QK_MEGAKERNEL_UNGROUP=112 QK_MEGAKERNEL_UNGROUP_FROM=56" "both $B QK_MEGAKERNEL_SKIP_O=0 QK_MEGAKERNEL_UNGROUP=112 QK_MEGAKERNEL_UNGROUP_FROM=56"
pack
rounds 2 8,64,120,232,344 32 "w-off $B X=1" "w-skipo $B QK_MEGAKERNEL_SKIP_O=0" "w-ug1 $B QK_MEGAKERNEL_UNGROUP=112 QK_MEGAKERNEL_UNGROUP_FROM=56"
pack
echo "t=$(elapsed)"
