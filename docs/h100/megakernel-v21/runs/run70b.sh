#!/usr/bin/env bash
# Device run 70b: stage traces (QK_MEGAKERNEL_TRACE, one step per launch) of the v21 candidate's build with the split
# O projection off and on (QK_MEGAKERNEL_O_SPLIT=16), 32 tokens from positions 20 (one chunk per head) and 80 (two).
. "$(dirname "$0")/lib.sh"
run_setup r70b
for p in 20 80; do
  for v in off s16; do
    s=0; [ $v = s16 ] && s=16
    QK_MEGAKERNEL_O_SPLIT=$s QK_MEGAKERNEL_TRACE=$R/trace-$v-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p$p.log 2>&1; echo "trace $v $p rc=$? $(elapsed)"
  done
done
