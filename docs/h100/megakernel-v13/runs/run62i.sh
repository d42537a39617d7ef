#!/usr/bin/env bash
# Device run 62i (v13): the placement padding's size for the consumer change (alt-pad: cc with QK_PAD selecting the
# greedy G=2 kernel padded with 416/456/496/536/576/656 never-run instructions) against 688b222 (base); alternating,
# 2 rounds; 0.6B preset, 20 KB slots.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-pad.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62i; mkdir -p $R
trap 'tar -czf $OUT/r62i.tgz -C /tmp r62i' EXIT
for i in 1 2; do for v in base 496 416 456 536 576 656; do X=$O; [ $v = base ] && X=$B
  QK_PAD=$v timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
