#!/usr/bin/env bash
# Device run 76a (v27): `ug`, attention ungrouped on short contexts (MegakernelArgs::ungroup: Qwen3-0.6B's 16 query
# heads are 16 attention items, each attended by the group-of-1 kernel with passes of 112 keys) in launches whose last
# step has at most QK_MEGAKERNEL_UNGROUP keys; 0 (the build's default) keeps main's grouped attention. GPU tests with
# the knob off and with every launch ungrouped; greedy ids both ways; 3 alternating rounds at 1/128/512 (256 tokens)
# and 2 of 32-token windows at 8/64/120/232/344, knob 0 / 448 / unbounded.
. "$(dirname "$0")/lib.sh"
run_setup r76a
gpu_tests_env off X=1
gpu_tests_env ug QK_MEGAKERNEL_UNGROUP=1000000
pack
genw $B greedy-off.json 256 --engine megakernel --temperature 0; echo "greedy off rc=$? $(ids $R/greedy-off.json) (main: aa30529c)"
QK_MEGAKERNEL_UNGROUP=1000000 genw $B greedy-ug.json 256 --engine megakernel --temperature 0; echo "greedy ug rc=$? $(ids $R/greedy-ug.json)"
QK_MEGAKERNEL_UNGROUP=1000000 genw $B greedy-ug2.json 256 --engine megakernel --temperature 0; echo "greedy ug again rc=$? $(ids $R/greedy-ug2.json)"
pack
rounds 3 1,128,512 256 "off $B X=1" "ug448 $B QK_MEGAKERNEL_UNGROUP=448" "ugall $B QK_MEGAKERNEL_UNGROUP=1000000"
pack
rounds 2 8,64,120,232,344 32 "w-off $B X=1" "w-ug $B QK_MEGAKERNEL_UNGROUP=1000000"
pack
echo "t=$(elapsed)"
