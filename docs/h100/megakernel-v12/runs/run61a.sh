#!/usr/bin/env bash
# Device run 61a (v12): steps per launch (QK_MEGAKERNEL_STEPS) against µs/token from JS, HEAD build; positions 1, 128, 1024.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61a; mkdir -p $R
trap 'tar -czf $OUT/r61a.tgz -C /tmp r61a' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
for i in 1 2; do for s in 1 4 16 64; do
  QK_MEGAKERNEL_STEPS=$s timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/s$s-$i.md > $R/s$s-$i.log 2>&1
  echo "steps=$s $i rc=$? $(grep -E '^\| megakernel position' $R/s$s-$i.md | awk -F'|' '{printf "%s=%s (%s) ", $2, $3, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
