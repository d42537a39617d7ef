#!/usr/bin/env bash
# Device run 72b (v23): stage traces (QK_MEGAKERNEL_TRACE, one step per launch, 32 tokens) of main and w16 from
# positions 20 (one chunk per head in both), 80 (main 2 chunks, w16 1) and 140 (main 3, w16 2): where w16's 20 µs per
# token at one chunk (run 72a) go.
. "$(dirname "$0")/lib.sh"
setup r72b
candidate_node w16
for p in 20 80 140; do
  for v in main w16; do
    X=$B; [ $v = w16 ] && X=$W16
    QK_MEGAKERNEL_TRACE=$R/trace-$v-p$p.json timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p$p.log 2>&1; echo "trace $v $p rc=$? $(elapsed)"
  done
done
xz -T4 $R/trace-*.json
