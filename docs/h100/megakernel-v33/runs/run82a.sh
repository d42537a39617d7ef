#!/usr/bin/env bash
# Device run 82a (v33): the staged attention with the keys split over the warps from end to end (each warp's tiles'
# scores, weights and share of the output; three barriers) against v32's landed build ($O): GPU tests, ids, 3
# alternating rounds at positions 1, 128, 512 and 1024, stage traces at 140 and 260 keys, then the host knobs on the
# new build at 128 (one LM-head copy in flight, 16 steps per launch, both).
. "$(dirname "$0")/lib.sh"
run_setup r82a baseline
gpu_tests
path_ids new $B X=1
pack
rounds 3 1,128,512,1024 256 "v32 $O X=1" "new $B X=1"
pack
TRACE_BUNDLE=$O trace v32-p140 139
TRACE_BUNDLE=$O trace v32-p260 259
trace new-p140 139
trace new-p260 259
xz -T4 $R/trace-*.json
pack
rounds 2 128 256 "new $B X=1" "lm1 $B QK_MEGAKERNEL_LM_INFLIGHT=1" "s16 $B QK_MEGAKERNEL_STEPS=16" "s16lm1 $B QK_MEGAKERNEL_STEPS=16 QK_MEGAKERNEL_LM_INFLIGHT=1"
pack
echo "t=$(elapsed)"
