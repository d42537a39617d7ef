#!/usr/bin/env bash
# Device run 61f (v12): QK_MEGAKERNEL_SKIP_ITEMS sweep (attention items up to which attending blocks take no QKV/O rows;
# default grid/4 = 33) on c29928c + knob, alternating; per-position profile 33 vs 66.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp .device/steptime/steptime.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61f; mkdir -p $R
trap 'tar -czf $OUT/r61f.tgz -C /tmp r61f' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for s in 33 66 132; do QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-$s.json 2>/dev/null; echo "greedy skip=$s rc=$? $(ids $R/greedy-$s.json)"; done
for i in 1 2; do for s in 33 66 88 132; do
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/skip$s-$i.md > $R/skip$s-$i.log 2>&1
  echo "skip=$s $i rc=$? $(grep -E '^\| megakernel position' $R/skip$s-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
for s in 33 66; do
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 100 $N /tmp/b/bundle/steptime.mjs 1,128,512 256 > $R/steptime-$s.log 2>&1; echo "steptime skip=$s rc=$?"; grep -E 'by position' $R/steptime-$s.log | sed -n '2p;5p;8p'
done
echo "t=$(( $(date +%s) - START ))s"
