#!/usr/bin/env bash
# Device run 79j (v30): the scores phase in parts. QK_MEGAKERNEL_DEBUG 16384 (on 79g's build): thread 0's clock64 after
# the q operands, after the first tiles' MMAs, after their epilogue, after the max. Traces at 140 and 260 keys.
. "$(dirname "$0")/lib.sh"
run_setup r79j
for p in 140 260; do
  QK_MEGAKERNEL_DEBUG=16384 QK_MEGAKERNEL_TRACE=$R/trace-d16384-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-d16384-p$p.log 2>&1; echo "trace $p rc=$? $(elapsed)"
done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
