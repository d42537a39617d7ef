#!/usr/bin/env bash
# Device run 78g (v29): the build to land (the staged attention over the whole ring, HF's roundings, on by default for
# 57-384 keys). GPU tests; greedy 256 and 400 tokens, sampled 256 (seed 1), 1.7B greedy 32; synccheck and racecheck
# of a staged 4-token decode (from position 1); then the 0.6B sweep with HF static + graph and the layered engine.
. "$(dirname "$0")/lib.sh"
run_setup r78g
land_check
echo "t=$(elapsed)"
