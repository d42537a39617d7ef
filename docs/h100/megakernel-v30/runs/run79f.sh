#!/usr/bin/env bash
# Device run 79f (v30): what bounds the staged steps. Diagnostics on 79e's build (outputs wrong): QK_MEGAKERNEL_DEBUG
# 2048 copies 32 rows per layer (the rest stale: the copies' traffic gone), 4096 skips the arithmetic (zeros
# published). Speed of the 128 row in alternation with the build as is and off; traces at 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79f
rounds 2 1,128 256 "new $B X=1" "off $B QK_MEGAKERNEL_STAGED_UNTIL=0" "d2048 $B QK_MEGAKERNEL_DEBUG=2048" "d4096 $B QK_MEGAKERNEL_DEBUG=4096" "d6144 $B QK_MEGAKERNEL_DEBUG=6144"
pack
traces "140 260" "new X=1" "d2048 QK_MEGAKERNEL_DEBUG=2048" "d4096 QK_MEGAKERNEL_DEBUG=4096" "d6144 QK_MEGAKERNEL_DEBUG=6144"
echo "t=$(elapsed)"
