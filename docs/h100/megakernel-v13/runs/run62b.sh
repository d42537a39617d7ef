#!/usr/bin/env bash
# Device run 62b (v13): ring slot size on 688b222 (QK_MEGAKERNEL_SLOT_KB 20 = default, 22, 24, 28, 32 with 1 copy in
# flight; 24 with 2), alternating, 2 rounds; 0.6B preset, 256 tokens, median of 3.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r62b; mkdir -p $R
trap 'tar -czf $OUT/r62b.tgz -C /tmp r62b' EXIT
for i in 1 2; do for v in 20 24 22 28 32 24i2; do
  kb=${v%i2}; inf=1; [ "$v" != "$kb" ] && inf=2
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_INFLIGHT=$inf timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/s$v-$i.md > $R/s$v-$i.log 2>&1
  echo "slot $v $i rc=$? $(grep -E '^\| megakernel position' $R/s$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
