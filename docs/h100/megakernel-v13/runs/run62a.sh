#!/usr/bin/env bash
# Device run 62a (v13): where the multi-chunk cost goes. Raw traces of 688b222 at positions whose sampled step has
# 1..5 chunks per KV head, modes 0 and 64 (attention stamp after its passes); per-window step times at 688b222.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp .device/steptime/steptime.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r62a; mkdir -p $R
trap 'tar -czf $OUT/r62a.tgz -C /tmp r62a' EXIT
for p in 10 70 125 180 235; do for m in 0 64; do
  QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-p$p-m$m.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered --markdown $R/trace-p$p-m$m.md > $R/trace-p$p-m$m.log 2>&1
  echo "trace p$p m$m rc=$? $(grep -E '^\| megakernel position' $R/trace-p$p-m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
(cd /tmp/b/bundle && timeout 120 $N steptime.mjs 1,128 256 > $R/steptime.log 2>&1; echo "steptime rc=$?"; grep -E 'by position' $R/steptime.log | sed -n '2p;5p')
gzip $R/*.json
echo "t=$(( $(date +%s) - START ))s"
