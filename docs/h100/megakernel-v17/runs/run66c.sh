#!/usr/bin/env bash
# Device run 66c: the norm stage with three consumer barriers (p2 = p1 + stage_norm_input rewritten) against p1 (the
# one-instruction conversions; v16 was measured against p1 in run 66b and is left out to fit the 64 MiB carry): p2's GPU
# tests and ids (bit-identical expected), then p1 and p2 alternating, 3 rounds; one 8B round of p1 and p2.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/p /tmp/q && mkdir -p /tmp/b /tmp/p /tmp/q && tar -xJf .device/bundle-js.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/p/bundle && cp -r /tmp/b/bundle /tmp/q/bundle
xz -dc .device/p1.node.xz > /tmp/p/bundle/qk_cuda.node
xz -dc .device/p2.node.xz > /tmp/q/bundle/qk_cuda.node
N=/tmp/node; P=/tmp/p/bundle/qk.mjs; Q=/tmp/q/bundle/qk.mjs; R=/tmp/r66c; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66c.tgz -C /tmp r66c' EXIT
cp .device/gputest/megakernel-test.mjs /tmp/q/bundle/
(cd /tmp/q/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "p2 megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" $R/megakernel-test.txt | head -8)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $Q generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-p2.json 2>/dev/null; echo "p2 greedy rc=$? $(ids $R/greedy-p2.json) (v16: aa30529c)"
timeout 60 $N $Q generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled-p2.json 2>/dev/null; echo "p2 sampled rc=$? $(ids $R/sampled-p2.json) (v16: dc211a68)"
run() {  # name, bundle
  local v=$1 X=$2
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run p1 $P; run p2 $Q; done
run8() {
  local v=$1 X=$2
  timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 64 --runs 3 --no-peers --no-layered --markdown $R/ab8-$v.md > $R/ab8-$v.log 2>&1
  echo "8B $v rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
run8 p1 $P; run8 p2 $Q
