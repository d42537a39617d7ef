#!/usr/bin/env bash
# Device run 64g (v15 final build, 3994eab): the 0.6B sweep, layered and megakernel, preset weights, no HF peers (device time left: 213 s).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b

N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r64g; mkdir -p $R
trap 'tar -czf $OUT/r64g.tgz -C /tmp r64g' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
timeout 150 $N $B bench decode --preset 0.6b --engines layered,megakernel --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --no-peers --markdown $R/decode06.md --report $R/report > $R/decode06.log 2>&1; echo "sweep rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| (layered|megakernel)|ceiling" $R/decode06.md | head -14
echo "t=$(( $(date +%s) - START ))s"
