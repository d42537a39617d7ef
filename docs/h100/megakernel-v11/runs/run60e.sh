#!/usr/bin/env bash
# Device run 60e (v11): one attention item per KV head up to 168 keys, the next pass's keys loaded while one is scored.
# GPU tests; A/B against the gather-only build (b4), alternating; repeats; HF agreement (seed-0 checkpoint).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-b4.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r60e; mkdir -p $R
P=/tmp/b/bundle/peers/hf_reference.py
trap 'tar -czf $OUT/r60e.tgz -C /tmp r60e' EXIT
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for i in 1 2 3; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-$i.json 2>/dev/null; echo "greedy $i rc=$? $(ids $R/greedy-$i.json) (v10: aa30529c)"; done
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
for i in 1 2; do for v in b4 new; do X=$B; [ $v = b4 ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,64,128,160,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
(cd /tmp && timeout 150 python3 $P /tmp/ref06 --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 > $R/hfref.txt 2>&1; echo "hfref rc=$? $(( $(date +%s) - START ))s")
for e in megakernel layered; do
  timeout 60 $N $B model compare /tmp/ref06 --engine $e --json $R/cmp-$e.json > $R/cmp-$e.md 2>&1; echo "compare $e rc=$? $(tail -1 $R/cmp-$e.md)"
done
timeout 60 $N $O model compare /tmp/ref06 --engine megakernel --json $R/cmp-b4-megakernel.json > $R/cmp-b4-megakernel.md 2>&1; echo "compare b4 megakernel rc=$? $(tail -1 $R/cmp-b4-megakernel.md)"
echo "t=$(( $(date +%s) - START ))s"
