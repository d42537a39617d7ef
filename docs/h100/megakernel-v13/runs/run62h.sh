#!/usr/bin/env bash
# Device run 62h (v13): consumer per-tile path (pairs dealt without a division, 32-bit row offsets, one empty-barrier
# arrival per warp) + the producer draft pp = alt-cc, against 688b222 (base); 20 and 28 KB slots; alternating, 2
# rounds; ids; megakernel GPU tests.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-cc.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62h; mkdir -p $R
trap 'tar -czf $OUT/r62h.tgz -C /tmp r62h' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>$R/greedy.err; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
for i in 1 2; do for v in base cc base28 cc28; do X=$B; case $v in cc*) X=$O;; esac; kb=20; case $v in *28) kb=28;; esac
  QK_MEGAKERNEL_SLOT_KB=$kb timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
cp .device/gputest/megakernel-test.mjs /tmp/o/bundle/
(cd /tmp/o/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed|failed" $R/megakernel-test.txt | head -12)
