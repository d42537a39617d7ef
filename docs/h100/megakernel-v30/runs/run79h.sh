#!/usr/bin/env bash
# Device run 79h (v30): is a tensor core slow to start after the ~12 µs between a block's attentions? QK_MEGAKERNEL_DEBUG
# 8192 (on 79g's build): warp 0 of each attending block times one HMMA right after the rows land, then a second
# dependent one (cycles, over the layer's stamps 0 and 1). Traces at 140 and 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79h
traces "140 260" "d8192 QK_MEGAKERNEL_DEBUG=8192"
echo "t=$(elapsed)"
