#!/usr/bin/env bash
# Device run 61k (v12 final build, 5a12b44): 8B skip-items check (33 = default with claimed tiles, vs 66) at positions
# 128 and 256, alternating; 8B sweep (preset, layered beside).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -d /tmp/b/bundle ] || { mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61k; REP=$R/report; mkdir -p $R $REP
trap 'tar -czf $OUT/r61k.tgz -C /tmp r61k' EXIT
for i in 1 2; do for s in 33 66; do
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 150 $N $B bench decode --preset 8b --engines megakernel --positions 128,256 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/skip8-$s-$i.md > $R/skip8-$s-$i.log 2>&1
  echo "8b skip=$s $i rc=$? $(grep -E '^\| megakernel position' $R/skip8-$s-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
timeout 330 $N $B bench decode --preset 8b --engines layered,megakernel --positions 1,128,1024,2048 --tokens 128 --runs 3 --name decode-8b --report $REP > $R/decode-8b.md 2> $R/decode-8b.err; echo "8b rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (layered|megakernel)" $R/decode-8b.md | head -10
echo "t=$(( $(date +%s) - START ))s"
