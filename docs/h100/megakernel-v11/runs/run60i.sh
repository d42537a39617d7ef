#!/usr/bin/env bash
# Device run 60i (v11 final build, 5f73e48): 8B sweep with HF peers (preset); 10 greedy repeats (0.6B preset);
# compute-sanitizer racecheck / synccheck on short decodes.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r60i; REP=$R/report; mkdir -p $R $REP
trap 'tar -czf $OUT/r60i.tgz -C /tmp r60i' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck synccheck; do
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool $tool --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/$tool.txt 2>&1; echo "$tool rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/$tool.txt | head -3
done
echo "t=$(( $(date +%s) - START ))s"
timeout 420 $N $B bench decode --preset 8b --engines layered,megakernel --positions 1,128,1024,2048 --tokens 128 --runs 3 --name decode-8b --report $REP > $R/decode-8b.md 2> $R/decode-8b.err; echo "8b rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (layered|megakernel)" $R/decode-8b.md | head -10
echo "t=$(( $(date +%s) - START ))s"
