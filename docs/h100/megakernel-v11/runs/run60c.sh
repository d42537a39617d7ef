#!/usr/bin/env bash
# Device run 60c (v11): raw traces at position 1 with diagnostic modes 32 (no weight copies), 4 (no dot products),
# 36 (neither); what a GEMV stage costs without its tiles' arrival, without its arithmetic.
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r60c; mkdir -p $R
trap 'tar -czf $OUT/r60c.tgz -C /tmp r60c' EXIT
for m in 0 32 4 36; do
  QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-m$m.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1 --tokens 64 --runs 1 --no-peers --no-layered --markdown $R/trace-m$m.md > $R/trace-m$m.log 2>&1; echo "trace m$m rc=$? $(grep -E '^\| megakernel position' $R/trace-m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
  QK_MEGAKERNEL_DEBUG=$m timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/m$m.md > $R/m$m.log 2>&1
  echo "mode $m rc=$? $(grep -E '^\| megakernel position' $R/m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done
