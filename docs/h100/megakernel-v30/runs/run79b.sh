#!/usr/bin/env bash
# Device run 79b (v30): is the staged attention's in-kernel time a cold start? QK_MEGAKERNEL_DEBUG 512 runs its
# arithmetic twice (the same values) and 128/256 stamp the second pass's phases (256 also the first pass's end). The
# trace reader now keeps the stamps' nanoseconds (they were doubles of about 1.8e18: multiples of 256 ns).
. "$(dirname "$0")/lib.sh"
run_setup r79b
for p in 140 260; do
  for v in "hf X=1" "f QK_MEGAKERNEL_STAGED_HF=0"; do
    read -r name e <<< "$v"
    for dbg in 128 256 640 768; do
      env $e QK_MEGAKERNEL_DEBUG=$dbg QK_MEGAKERNEL_TRACE=$R/trace-$name-p$p-d$dbg.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$name-p$p-d$dbg.log 2>&1; echo "trace $name $p $dbg rc=$? $(elapsed)"
    done
  done
done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
