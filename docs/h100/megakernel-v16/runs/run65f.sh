#!/usr/bin/env bash
# Device run 65f: is Nsight Compute on the device host, and where do the megakernel's warps stall? One launch of the
# greedy kernel (4 steps from position 1), application replay (the launch is stateful: kernel replay would re-run it
# against its own outputs), warp-state and instruction statistics.
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"; ls /usr/local/cuda/bin | tr '\n' ' '; echo
[ -n "$NCU" ] || exit 0
R=/tmp/r65f; rm -rf $R; mkdir -p $R /tmp/b; trap 'tar -czf $OUT/r65f.tgz -C /tmp r65f' EXIT
[ -f /tmp/b/bundle/qk.mjs ] || tar -xJf .device/bundle.tar.xz -C /tmp/b
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 300 $NCU --replay-mode application -k regex:qwen3_decode -c 1 \
  --section WarpStateStats --section LaunchStats --section InstructionStats --section SpeedOfLight -o $R/prof \
  /tmp/node /tmp/b/bundle/qk.mjs generate --preset 0.6b --engine megakernel --max-tokens 8 --temperature 0 "hello" > $R/ncu.log 2>&1
echo "ncu rc=$?"; tail -5 $R/ncu.log
$NCU --import $R/prof.ncu-rep --page details > $R/details.txt 2>&1; grep -iE 'stall|warp cycles|issued|duration|no instruction|branch|wait|barrier|long scoreboard|short' $R/details.txt | head -60
