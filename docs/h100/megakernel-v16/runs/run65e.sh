#!/usr/bin/env bash
# Device run 65e: where v16's gain comes from. The landed v16 build (5c13b2e) against v15 (alt-head, 9687509) and v15
# with only the weight copies folded into one hinted path (alt-fold, fold-only.patch), alternating, 3 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o /tmp/f && mkdir -p /tmp/b /tmp/o /tmp/f && tar -xJf .device/bundle.tar.xz -C /tmp/b
cp -r /tmp/b/bundle /tmp/o/bundle && cp -r /tmp/b/bundle /tmp/f/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
xz -dc .device/alt-fold.node.xz > /tmp/f/bundle/qk_cuda.node
N=/tmp/node; R=/tmp/r65e; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r65e.tgz -C /tmp r65e' EXIT
run() {  # name, bundle
  local v=$1 X=$2
  timeout 120 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run head /tmp/o/bundle/qk.mjs; run fold /tmp/f/bundle/qk.mjs; run new /tmp/b/bundle/qk.mjs; done
echo "t=$(( $(date +%s) - START ))s"
