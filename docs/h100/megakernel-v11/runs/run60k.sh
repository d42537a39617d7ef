#!/usr/bin/env bash
# Device run 60k (v11): chunk 0's block merges a head's attention chunks from flagged fp32 records (no fence, no
# arrival counter). GPU tests; ids (must be v10's); A/B against HEAD 5f73e48, alternating; trace (mode 64) at 128;
# racecheck / synccheck on decodes that merge chunks (position 100).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r60k; mkdir -p $R
trap 'tar -czf $OUT/r60k.tgz -C /tmp r60k' EXIT
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
for i in 1 2; do for v in head new; do X=$B; [ $v = head ] && X=$O
  timeout 120 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
timeout 150 $N $B bench decode --preset 8b --engines megakernel --positions 1024 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/ab8-new.md > $R/ab8-new.log 2>&1; echo "8b new rc=$? $(grep -E '^\| megakernel position' $R/ab8-new.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
echo "t=$(( $(date +%s) - START ))s"
QK_MEGAKERNEL_DEBUG=64 QK_MEGAKERNEL_TRACE=$R/trace64-p128.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 128 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace64-p128.log 2>&1; echo "trace64 p128 rc=$?"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in synccheck racecheck; do
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 200 $CS --tool $tool --kernel-name kns=qwen3_decode $N $B bench decode --preset 0.6b --engines megakernel --positions 100 --tokens 3 --runs 1 --no-peers --no-layered --markdown $R/$tool.md > $R/$tool.txt 2>&1; echo "$tool rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/$tool.txt | head -3
done
echo "t=$(( $(date +%s) - START ))s"
