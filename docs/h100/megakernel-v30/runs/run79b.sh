#!/usr/bin/env bash
# Device run 79b (v30): is the staged attention's in-kernel time a cold start? QK_MEGAKERNEL_DEBUG 512 runs its
# arithmetic twice (the same values) and 128/256 stamp the second pass's phases (256 also the first pass's end). The
# trace reader now keeps the stamps' nanoseconds (they were doubles of about 1.8e18: multiples of 256 ns).
. "$(dirname "$0")/lib.sh"
run_setup r79b
phase_traces 128 256 640 768
echo "t=$(elapsed)"
