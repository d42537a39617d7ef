#!/usr/bin/env bash
# Device run 82d (v33): HF agreement of the build that lands over seeds 0-7 (hf_reference.py's 0.6B checkpoints, 256
# teacher-forced steps from a 32-token prompt, HF bf16 eager; the eight references made side by side), then synccheck
# and racecheck of a 4-token decode staged from position 1 on the staged kernel and on the kernel with both paths
# (QK_MEGAKERNEL_PATH_KERNELS=0). The log also goes to $OUT/log-r82d.txt.
. "$(dirname "$0")/lib.sh"
run_setup r82d
{
for s in 0 1 2 3 4 5 6 7; do hfref $s & done
wait
for s in 0 1 2 3 4 5 6 7; do compare_hf /tmp/hf$s seed$s-land X=1; done
pack
sanitizers_with ring QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1
pack
sanitizers_with ringboth QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1 QK_MEGAKERNEL_PATH_KERNELS=0
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r82d.txt
