#!/usr/bin/env bash
# Device run 72i (v23, a diagnostic): what the attention's passes cost on the critical path. nopass: main (455e745)
# built with QK_MK_DIAG_NOPASS (../diag-nopass.patch: the pass loop skipped, warp 0 weighing zeros, so the outputs are
# wrong but finite; everything else, the waits, QK-norm, RoPE, the warps' merge and the stores, as main). A/B, 3
# rounds at 1/128 and 32-token windows at 8/64/120.
. "$(dirname "$0")/lib.sh"
setup r72i
candidate_node nopass
rounds 3 1,128 256 "main $B X=1" "nopass $NOPASS X=1"
rounds 3 8,64,120 32 "w-main $B X=1" "w-nopass $NOPASS X=1"
echo "t=$(elapsed)"
