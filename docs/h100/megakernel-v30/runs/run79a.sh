#!/usr/bin/env bash
# Device run 79a (v30): where the staged attention's in-kernel time goes. A build with QK_MEGAKERNEL_DEBUG 128/256
# (thread 0's clock64 at the ends of its phases, written over the layer's stamps 0-3); traces at 140 and 260 keys,
# HF's roundings and flash-style; nvidia-smi clocks during the 128 row; the kernel's SASS.
. "$(dirname "$0")/lib.sh"
run_setup r79a
for p in 140 260; do
  for v in "hf X=1" "f QK_MEGAKERNEL_STAGED_HF=0"; do
    read -r name e <<< "$v"
    for dbg in 128 256; do
      env $e QK_MEGAKERNEL_DEBUG=$dbg QK_MEGAKERNEL_TRACE=$R/trace-$name-p$p-d$dbg.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$name-p$p-d$dbg.log 2>&1; echo "trace $name $p $dbg rc=$? $(elapsed)"
    done
  done
done
xz -T4 $R/trace-*.json
pack
i=1
smi_during r128 ab main 1,128 256 $B X=1
smi_during idle sleep 2
pack
sass
pack
echo "t=$(elapsed)"
