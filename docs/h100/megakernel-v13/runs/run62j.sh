#!/usr/bin/env bash
# Device run 62j (v13): larger placement paddings (616-896) for the consumer change, and 28 KB slots with two of them
# (alt-pad: QK_PAD selects the greedy G=2 kernel's padding) against 688b222 (base); alternating, 2 rounds; 0.6B preset.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-pad.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62j; mkdir -p $R
trap 'tar -czf $OUT/r62j.tgz -C /tmp r62j' EXIT
for i in 1 2; do for v in base 656 616 736 816 896 656s28 896s28; do kb=20; case $v in *s28) kb=28;; esac; p=${v%s28}; X=$O; [ $v = base ] && X=$B
  QK_PAD=$p QK_MEGAKERNEL_SLOT_KB=$kb timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
