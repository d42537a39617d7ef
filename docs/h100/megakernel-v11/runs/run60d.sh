#!/usr/bin/env bash
# Device run 60d (v11): the ring again with the new gather: slot size × copies in flight, positions 1/128/1024,
# two rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r60d; mkdir -p $R
trap 'tar -czf $OUT/r60d.tgz -C /tmp r60d' EXIT
for i in 1 2; do
for cfg in 20:1 24:1 28:1 32:1 36:1 48:1 24:2 32:2 48:2; do kb=${cfg%:*}; fl=${cfg#*:}
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_INFLIGHT=$fl timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ring-$kb-$fl-$i.md > $R/ring-$kb-$fl-$i.log 2>&1
  echo "ring ${kb}KB inflight $fl rc=$? $(grep -E '^\| megakernel position' $R/ring-$kb-$fl-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
