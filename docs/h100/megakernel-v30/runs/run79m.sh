#!/usr/bin/env bash
# Device run 79m (v30): the staged rows' copies with an L2 evict_last policy (QK_MEGAKERNEL_KV_L2_LAST=1, on 79k's
# build), so that a step's KV rows may still be in L2 at the next step (run 79l: without their HBM traffic the 128 row
# took 20 µs per token less). 3 alternating rounds at 1/128; traces at 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79m
rounds 3 1,128 256 "new $B X=1" "last $B QK_MEGAKERNEL_KV_L2_LAST=1"
traces 260 "new X=1" "last QK_MEGAKERNEL_KV_L2_LAST=1"
echo "t=$(elapsed)"
