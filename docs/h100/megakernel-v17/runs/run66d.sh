#!/usr/bin/env bash
# Device run 66d (v17 = 062e4e6, the one-instruction conversions): GPU tests (megakernel, layered); greedy, sampled and
# 400-token ids; 10 greedy repeats; compute-sanitizer synccheck and racecheck on a 4-token decode; v16 (01d2952) and
# v17 alternating at positions 1-4096, 3 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle-p1.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v16.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r66d; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66d.tgz -C /tmp r66d' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -14)
(cd /tmp/b/bundle && timeout 150 $N layered-test.mjs > $R/layered-test.txt 2>&1; echo "layered tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/layered-test.txt | head -6)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v16: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v16: d7460a19)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
echo "(aa30529c expected) t=$(( $(date +%s) - START ))s"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
run() {  # name, bundle
  local v=$1 X=$2
  timeout 120 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024,2048,4096 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run v16 $O; run v17 $B; done
