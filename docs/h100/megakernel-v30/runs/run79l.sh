#!/usr/bin/env bash
# Device run 79l (v30): does the staged rows' traffic slow the hop to the attending blocks' q/k/v? QK_MEGAKERNEL_DEBUG
# 2048 (on 79k's build; outputs wrong): every row's bulk copy reads the head's row 0 (one L2-resident 256-byte row, so
# no HBM traffic). 2 alternating rounds against the build as is; traces at 140 and 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79l
rounds 2 1,128 256 "new $B X=1" "d2048 $B QK_MEGAKERNEL_DEBUG=2048"
traces "140 260" "new X=1" "d2048 QK_MEGAKERNEL_DEBUG=2048"
echo "t=$(elapsed)"
