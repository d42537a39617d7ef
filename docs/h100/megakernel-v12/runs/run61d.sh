#!/usr/bin/env bash
# Device run 61d (v12): code-size/specialisation test. head = 5fb0f5e; head_g2 = HEAD with attend<2> only (0.6B-only test
# build, 199 regs, 189 KB greedy text vs 333 KB); new_g2 = flagged merge <= 8 chunks, attend<2> only. Alternating.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/v && mkdir -p /tmp/v && tar -xJf .device/bundle-js.tar.xz -C /tmp/v && cp .device/steptime/steptime.mjs /tmp/v/bundle/
for v in head head_g2 new_g2; do cp -r /tmp/v/bundle /tmp/v/$v; xz -dc .device/alt-$v.node.xz > /tmp/v/$v/qk_cuda.node; done
N=/tmp/node; R=/tmp/r61d; mkdir -p $R
trap 'tar -czf $OUT/r61d.tgz -C /tmp r61d' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for v in head_g2 new_g2; do
  timeout 60 $N /tmp/v/$v/qk.mjs generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-$v.json 2>/dev/null; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (v10: aa30529c)"
done
for i in 1 2; do for v in head head_g2 new_g2; do
  timeout 100 $N /tmp/v/$v/qk.mjs bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
for v in head head_g2 new_g2; do
  timeout 100 $N /tmp/v/$v/steptime.mjs 1,1024 256 > $R/steptime-$v.log 2>&1; echo "steptime $v rc=$?"; grep -E 'by position' $R/steptime-$v.log | sed -n '2p;5p'
done
echo "t=$(( $(date +%s) - START ))s"
