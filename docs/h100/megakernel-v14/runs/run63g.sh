#!/usr/bin/env bash
# Device run 63g (v14 final build, 939bf07): the 8B sweep (megakernel), and 1.7B and 4B presets (megakernel and
# layered) at positions 1 and 1024.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r63g; mkdir -p $R
trap 'tar -czf $OUT/r63g.tgz -C /tmp r63g' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
timeout 220 $N $B bench decode --preset 8b --engines megakernel --positions 1,128,1024,2048 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/decode8b.md > $R/decode8b.log 2>&1; echo "8b rc=$? $(grep -E '^\| megakernel position' $R/decode8b.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
grep -E "^\| megakernel" $R/decode8b.md | head -5
for m in 1.7b 4b; do
  timeout 150 $N $B bench decode --preset $m --engines layered,megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --markdown $R/decode$m.md > $R/decode$m.log 2>&1; echo "$m rc=$? $(( $(date +%s) - START ))s"
  grep -E "^\| (layered|megakernel)" $R/decode$m.md | head -6
done
echo "t=$(( $(date +%s) - START ))s"
