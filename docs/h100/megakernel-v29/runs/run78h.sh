#!/usr/bin/env bash
# Device run 78h (v29): the build to land: the staged attention over the whole ring with HF's roundings, on by default
# for steps of 57-384 keys, decided per step (78g decided per launch: the sampling tests saw other bits in launches
# that crossed 57 keys), every consumer arriving on the barrier that hands the ring back to the LM head (78g: racecheck
# reported the producer's copies against the staged rows with one thread arriving). GPU tests; greedy 256 and 400
# tokens, sampled 256 (seed 1), 1.7B greedy 32; synccheck and racecheck of a staged 4-token decode (from position 1);
# the 0.6B sweep with HF static + graph and the layered engine.
. "$(dirname "$0")/lib.sh"
run_setup r78h
land_check
echo "t=$(elapsed)"
