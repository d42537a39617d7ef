#!/usr/bin/env bash
# Device run 62l (v13): the short-context ring (28 KB slots for launches below position 512) = bundle, against 35fd348
# (alt-v13: always the 20 KB ring), alternating, 2 rounds; megakernel GPU tests (with the two-ring bit test).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-v13.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62l; mkdir -p $R
trap 'tar -czf $OUT/r62l.tgz -C /tmp r62l' EXIT
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed|short-context" $R/megakernel-test.txt | head -12)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 600 --temperature 0 --json "Tell me about the sea" > $R/greedy600.json 2>/dev/null; echo "greedy 600 rc=$? $(ids $R/greedy600.json)"
timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 600 --temperature 0 --json "Tell me about the sea" > $R/greedy600-v13.json 2>/dev/null; echo "greedy 600 v13 rc=$? $(ids $R/greedy600-v13.json)"
for i in 1 2; do for v in v13 ring; do X=$B; [ $v = v13 ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,384,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
