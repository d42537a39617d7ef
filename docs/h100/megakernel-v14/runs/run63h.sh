#!/usr/bin/env bash
# Device run 63h (v14 final build, 939bf07): where a layer's time goes now. Raw traces at positions 1 and 128 in
# modes 0, 4 (no dot products) and 36 (no dot products, no weight copies); the modes' µs per token at 1 and 128.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r63h; mkdir -p $R
trap 'tar -czf $OUT/r63h.tgz -C /tmp r63h' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
for m in 0 4 36; do for p in 1 128; do
  QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-m$m-p$p.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-m$m-p$p.log 2>&1; echo "trace m$m p$p rc=$?"
done; done
for m in 0 4 32 36; do
  QK_MEGAKERNEL_DEBUG=$m timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/m$m.md > $R/m$m.log 2>&1
  echo "mode $m rc=$? $(grep -E '^\| megakernel position' $R/m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done
gzip -9 $R/trace-*.json
echo "t=$(( $(date +%s) - START ))s"
