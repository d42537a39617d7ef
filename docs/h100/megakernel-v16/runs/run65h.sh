#!/usr/bin/env bash
# Device run 65h (exploratory, not landed): the GEMV dot products with two partial sums per row (even and odd
# elements, dot2-sums.patch), against v16 (5c13b2e) alternating, 3 rounds; its GPU tests (the megakernel against the
# layered engine within tolerance) and greedy ids. Both addons without PTX.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/p && mkdir -p /tmp/b /tmp/p && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/p/bundle
xz -dc .device/alt-p2.node.xz > /tmp/p/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; P=/tmp/p/bundle/qk.mjs; R=/tmp/r65h; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r65h.tgz -C /tmp r65h' EXIT
cp .device/gputest/megakernel-test.mjs /tmp/p/bundle/
(cd /tmp/p/bundle && timeout 120 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "p2 megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" $R/megakernel-test.txt | head -8)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $P generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-p2.json 2>/dev/null; echo "p2 greedy rc=$? $(ids $R/greedy-p2.json) (v16: aa30529c)"
run() {  # name, bundle
  local v=$1 X=$2
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run v16 $B; run p2 $P; done
