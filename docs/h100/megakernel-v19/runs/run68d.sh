#!/usr/bin/env bash
# Device run 68d (v19, H100, after 68c on the same machine): Qwen3-1.7B and 4B shapes with the LM head at one and at
# two copies in flight, alternating, 2 rounds (the 8B shape lost 20 µs per token with two, run 68c).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r68d; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68d.tgz -C /tmp r68d' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
for i in 1 2; do
  for m in 1.7b 4b; do
    for lm in 1 2; do
      QK_MEGAKERNEL_LM_INFLIGHT=$lm timeout 100 $N $B bench decode --preset $m --engines megakernel --no-layered --no-peers --positions 1,1024 --tokens 128 --runs 3 --markdown $R/ab-$m-lm$lm-$i.md > $R/ab-$m-lm$lm-$i.log 2>&1
      echo "$m lm$lm $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$m-lm$lm-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
    done
  done
done
