#!/usr/bin/env bash
# Device run 61m (v12 final build, 5a12b44): 1.7B (fixed shares, so the new default skip of half the grid applies)
# skip items 33 against 66 at positions 1, 128 and 256, alternating.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -d /tmp/b/bundle ] || { mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61m; mkdir -p $R
trap 'tar -czf $OUT/r61m.tgz -C /tmp r61m' EXIT
for i in 1 2; do for s in 33 66; do
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 120 $N $B bench decode --preset 1.7b --engines megakernel --positions 1,128,256 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/skip17-$s-$i.md > $R/skip17-$s-$i.log 2>&1
  echo "1.7b skip=$s $i rc=$? $(grep -E '^\| megakernel position' $R/skip17-$s-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
