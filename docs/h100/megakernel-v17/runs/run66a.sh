#!/usr/bin/env bash
# Device run 66a: the poll probe (probes/poll.cu: a second poll in flight per pending word, in registers or as
# cp.async copies, against the kernel's re-poll), then Nsight Compute's source counters on the v16 kernel (one launch
# of the greedy G = 2 kernel, 4 steps from position 1, application replay): stall reasons per SASS instruction.
set -u
START=$(date +%s)
R=/tmp/r66a; rm -rf $R; mkdir -p $R; trap 'tar -czf $OUT/r66a.tgz -C /tmp r66a' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
nvcc -O3 -arch=sm_90a -o /tmp/poll docs/h100/megakernel-v17/probes/poll.cu > $R/nvcc.txt 2>&1 || { echo "nvcc failed"; cat $R/nvcc.txt; }
timeout 240 /tmp/poll > $R/poll.txt 2>&1; echo "poll rc=$? $(( $(date +%s) - START ))s"; cat $R/poll.txt
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
mkdir -p /tmp/b && tar -xJf .device/bundle-v16.tar.xz -C /tmp/b
NCU=/usr/local/cuda/bin/ncu
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 280 $NCU --replay-mode application -k regex:qwen3_decode -c 1 \
  --section SourceCounters --section WarpStateStats --import-source yes -o $R/src \
  /tmp/node /tmp/b/bundle/qk.mjs generate --preset 0.6b --engine megakernel --max-tokens 8 --temperature 0 "hello" > $R/ncu.log 2>&1
echo "ncu rc=$? $(( $(date +%s) - START ))s"; tail -3 $R/ncu.log
timeout 120 $NCU --import $R/src.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2> $R/sass.err; echo "source page rc=$? $(wc -c < $R/sass.csv) bytes"; head -c 600 $R/sass.err
timeout 60 $NCU --import $R/src.ncu-rep --page details > $R/details.txt 2>&1
xz -T4 $R/sass.csv; rm -f $R/src.ncu-rep
echo "done $(( $(date +%s) - START ))s"
