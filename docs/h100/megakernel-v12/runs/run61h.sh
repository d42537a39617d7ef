#!/usr/bin/env bash
# Device run 61h (v12): the flagged merge in one batch per thread for up to 8 chunks ((max, sum) through shared memory)
# = new (+ the counter merge: (max, sum) through shared memory, outputs in explicit batches of 8), against c29928c + skip knob (knob); both with QK_MEGAKERNEL_SKIP_ITEMS 33 (default) and 66. Alternating.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp .device/steptime/steptime.mjs /tmp/b/bundle/ && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-knob.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r61h; mkdir -p $R
trap 'tar -czf $OUT/r61h.tgz -C /tmp r61h' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
QK_MEGAKERNEL_SKIP_ITEMS=66 timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy400 skip66 rc=$? $(ids $R/greedy400.json)"
timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400-knob.json 2>/dev/null; echo "greedy400 knob rc=$? $(ids $R/greedy400-knob.json)"
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
for i in 1 2; do for v in knob33 knob66 new33 new66; do X=$B; case $v in knob*) X=$O;; esac; s=${v: -2}
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
for s in 33 66; do
  QK_MEGAKERNEL_SKIP_ITEMS=$s timeout 100 $N /tmp/b/bundle/steptime.mjs 128,512,1024 256 > $R/steptime-new$s.log 2>&1; echo "steptime new skip=$s rc=$?"; grep -E 'by position' $R/steptime-new$s.log | sed -n '2p;5p;8p'
done
echo "t=$(( $(date +%s) - START ))s"
