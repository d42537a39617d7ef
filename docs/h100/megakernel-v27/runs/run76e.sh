#!/usr/bin/env bash
# Device run 76e (v27): `bal`, gate/up and down shares that give the attending blocks (which skip QKV and O rows on
# short contexts) their part of the layer's bytes (QK_MEGAKERNEL_BALANCE percent of the way; 0, the build's default,
# is main's even shares). GPU tests at 100; ids at 100 (the same rows, so main's ids); 3 alternating rounds at
# 1/128/512 for 0 / 50 / 100; 2 rounds of 32-token windows for 0 / 100.
. "$(dirname "$0")/lib.sh"
run_setup r76e
gpu_tests_env bal100 QK_MEGAKERNEL_BALANCE=100
pack
QK_MEGAKERNEL_BALANCE=100 genw $B greedy-bal.json 256 --engine megakernel --temperature 0; echo "greedy bal rc=$? $(ids $R/greedy-bal.json) (main: aa30529c)"
QK_MEGAKERNEL_BALANCE=100 genw $B greedy400-bal.json 400 --engine megakernel --temperature 0; echo "greedy 400 bal rc=$? $(ids $R/greedy400-bal.json) (main: d7460a19)"
QK_MEGAKERNEL_BALANCE=100 genw $B sampled-bal.json 256 --engine megakernel --seed 1; echo "sampled bal rc=$? $(ids $R/sampled-bal.json) (main: dc211a68)"
pack
rounds 3 1,128,512 256 "off $B X=1" "bal50 $B QK_MEGAKERNEL_BALANCE=50" "bal100 $B QK_MEGAKERNEL_BALANCE=100"
pack
rounds 2 8,64,120,232,344 32 "w-off $B X=1" "w-bal100 $B QK_MEGAKERNEL_BALANCE=100"
pack
echo "t=$(elapsed)"
