#!/usr/bin/env bash
# Device run 61c (v12): flagged chunk merge for heads of <= 8 chunks, v10's counter merge beyond (new) against HEAD 5fb0f5e (head), alternating;
# ids, GPU tests, per-position profile (steptime).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp .device/steptime/steptime.mjs /tmp/b/bundle/ && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r61c; mkdir -p $R
trap 'tar -czf $OUT/r61c.tgz -C /tmp r61c' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
for v in head new; do X=/tmp/b/bundle; [ $v = head ] && X=/tmp/o/bundle
  timeout 100 $N $X/steptime.mjs 1,128,1024 256 > $R/steptime-$v.log 2>&1; echo "steptime $v rc=$?"; grep -E '^pos .* run 0|by position' $R/steptime-$v.log | head -6
done
for i in 1 2 3; do for v in head new; do X=$B; [ $v = head ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
