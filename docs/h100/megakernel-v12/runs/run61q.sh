#!/usr/bin/env bash
# Device run 61q (v12): placement padding size: 688b222 (496 never-run instructions) against the same source with
# ALT instructions (alt-pALT), alternating, 2 rounds. Usage: run61q.sh ALT
set -u
ALT=$1
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-p$ALT.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r61q-p$ALT; mkdir -p $R
trap 'tar -czf $OUT/r61q-p$ALT.tgz -C /tmp r61q-p$ALT' EXIT
for i in 1 2; do for v in p496 p$ALT; do X=$B; [ $v = p$ALT ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
