#!/usr/bin/env bash
# Device run 62c (v13): bytes in flight per block, on 688b222: smaller slots with 2 copies in flight (16, 14, 12 KB)
# against 20 KB (default) and 28 KB with 1; alternating, 2 rounds; 0.6B preset, 256 tokens, median of 3.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r62c; mkdir -p $R
trap 'tar -czf $OUT/r62c.tgz -C /tmp r62c' EXIT
for i in 1 2; do for v in 20 28 16i2 14i2 12i2 28i1; do
  kb=${v%i*}; inf=1; [ "$v" != "$kb" ] && inf=${v#*i}
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_INFLIGHT=$inf timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/s$v-$i.md > $R/s$v-$i.log 2>&1
  echo "slot $v $i rc=$? $(grep -E '^\| megakernel position' $R/s$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
