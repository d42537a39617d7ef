#!/usr/bin/env bash
# Device run 76f (v27): `share`, the attending blocks of a short context take P% of an even share of QKV and O rows
# (QK_MEGAKERNEL_SKIP_SHARE=P; 0, the build's default: none, as main) instead of none, in balance.patch's build. GPU
# tests at 50; ids at 50 (the same rows' arithmetic: main's ids); 3 alternating rounds at 1/128/512 for 0 / 25 / 50;
# 2 rounds of 32-token windows for 0 / 25 / 50.
. "$(dirname "$0")/lib.sh"
run_setup r76f
gpu_tests_env share50 QK_MEGAKERNEL_SKIP_SHARE=50
pack
QK_MEGAKERNEL_SKIP_SHARE=50 genw $B greedy-share.json 256 --engine megakernel --temperature 0; echo "greedy share rc=$? $(ids $R/greedy-share.json) (main: aa30529c)"
QK_MEGAKERNEL_SKIP_SHARE=50 genw $B sampled-share.json 256 --engine megakernel --seed 1; echo "sampled share rc=$? $(ids $R/sampled-share.json) (main: dc211a68)"
pack
rounds 3 1,128,512 256 "off $B X=1" "share25 $B QK_MEGAKERNEL_SKIP_SHARE=25" "share50 $B QK_MEGAKERNEL_SKIP_SHARE=50"
pack
rounds 2 8,64,120,232,344 32 "w-off $B X=1" "w-share25 $B QK_MEGAKERNEL_SKIP_SHARE=25" "w-share50 $B QK_MEGAKERNEL_SKIP_SHARE=50"
pack
echo "t=$(elapsed)"
