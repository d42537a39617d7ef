#!/usr/bin/env bash
# Device run 60b (v11): raw traces (positions 1, 128) and diagnostic modes 36/47 of the new gather; gather batch 4
# against 8 (0.6B, 8B), alternating; the ring knobs again (slot KB × copies in flight).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-b8.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r60b; mkdir -p $R
trap 'tar -czf $OUT/r60b.tgz -C /tmp r60b' EXIT
for p in 1 128; do
  QK_MEGAKERNEL_TRACE=$R/trace-p$p.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-p$p.log 2>&1; echo "trace p$p rc=$?"
done
for m in 36 47; do
  QK_MEGAKERNEL_DEBUG=$m timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/m$m.md > $R/m$m.log 2>&1
  echo "mode $m rc=$? $(grep -E '^\| megakernel position' $R/m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done
echo "t=$(( $(date +%s) - START ))s"
for i in 1 2; do for v in b4 b8; do X=$B; [ $v = b8 ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
for v in b4 b8; do X=$B; [ $v = b8 ] && X=$O
  timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/ab8-$v.md > $R/ab8-$v.log 2>&1
  echo "8b $v rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done
echo "t=$(( $(date +%s) - START ))s"
for kb in 16 20 24; do for fl in 1 2; do
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_INFLIGHT=$fl timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ring-$kb-$fl.md > $R/ring-$kb-$fl.log 2>&1
  echo "ring ${kb}KB inflight $fl rc=$? $(grep -E '^\| megakernel position' $R/ring-$kb-$fl.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
