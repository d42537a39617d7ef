#!/usr/bin/env bash
# Device run 79j (v30): the scores phase in parts. QK_MEGAKERNEL_DEBUG 16384 (on 79g's build): thread 0's clock64 after
# the q operands, after the first tiles' MMAs, after their epilogue, after the max. Traces at 140 and 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79j
traces "140 260" "d16384 QK_MEGAKERNEL_DEBUG=16384"
echo "t=$(elapsed)"
