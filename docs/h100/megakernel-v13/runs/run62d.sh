#!/usr/bin/env bash
# Device run 62d (v13): raw traces at position 10 (1 chunk) of 688b222 in modes 0, 32 (no weight copies), 4 (no dot
# products), 36 (neither), with 20 KB and 28 KB slots: per-block GEMV durations.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r62d; mkdir -p $R
trap 'tar -czf $OUT/r62d.tgz -C /tmp r62d' EXIT
for kb in 20 28; do for m in 0 32 4 36; do
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-s$kb-m$m.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 10 --tokens 64 --runs 1 --no-peers --no-layered --markdown $R/trace-s$kb-m$m.md > $R/trace-s$kb-m$m.log 2>&1
  echo "trace s$kb m$m rc=$? $(( $(date +%s) - START ))s"
done; done
for m in 32 4 36; do
  QK_MEGAKERNEL_DEBUG=$m timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/m$m.md > $R/m$m.log 2>&1
  echo "mode $m rc=$? $(grep -E '^\| megakernel position' $R/m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done
gzip $R/*.json
