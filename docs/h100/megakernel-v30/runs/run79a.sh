#!/usr/bin/env bash
# Device run 79a (v30): where the staged attention's in-kernel time goes. A build with QK_MEGAKERNEL_DEBUG 128/256
# (thread 0's clock64 at the ends of its phases, written over the layer's stamps 0-3); traces at 140 and 260 keys,
# HF's roundings and flash-style; nvidia-smi clocks during the 128 row; the kernel's SASS.
. "$(dirname "$0")/lib.sh"
run_setup r79a
phase_traces 128 256
i=1
smi_during r128 ab main 1,128 256 $B X=1
smi_during idle sleep 2
pack
sass
pack
echo "t=$(elapsed)"
