#!/usr/bin/env bash
# Device run 68f (v19 candidate: heads of 2-3 chunks merged by the O blocks): GPU tests; ids (10 greedy repeats, sampled,
# 400 tokens, long prompts); compute-sanitizer on decodes at 2 and 3 chunks per head; A/B against v19 (ceb8733, built
# without PTX to fit the carry) with the knob QK_MEGAKERNEL_O_MERGE=0/2/3, 3 rounds; 32-token windows per chunk count.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v19.node.xz > /tmp/o/bundle/qk_cuda.node
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r68f; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68f.tgz -C /tmp r68f' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v19: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v19: d7460a19)"
L500=$(for i in $(seq 1 500); do printf 'sea '; done)
L1100=$(for i in $(seq 1 1100); do printf 'sea '; done)
L60=$(for i in $(seq 1 60); do printf 'sea '; done)
L120=$(for i in $(seq 1 120); do printf 'sea '; done)
timeout 90 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "$L500" > $R/long500.json 2>/dev/null; echo "long500 rc=$? $(ids $R/long500.json) (v17-v19: df4f46d5)"
timeout 90 $N $B generate --preset 0.6b --engine megakernel --max-tokens 250 --temperature 0 --json "$L1100" > $R/long1100.json 2>/dev/null; echo "long1100 rc=$? $(ids $R/long1100.json) (v17-v19: 4b321e1a)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
QK_MEGAKERNEL_O_MERGE=0 timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-omerge0.json 2>/dev/null; echo "greedy O_MERGE=0 rc=$? $(ids $R/greedy-omerge0.json) (v9-v19: aa30529c)"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "$L60" > $R/synccheck60.txt 2>&1; echo "synccheck 60 rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck60.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 3 --temperature 0 "$L60" > $R/racecheck60.txt 2>&1; echo "racecheck 60 rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck60.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 3 --temperature 0 "$L120" > $R/racecheck120.txt 2>&1; echo "racecheck 120 rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck120.txt | head -3
run() {  # name, positions, tokens, bundle, env...
  local v=$1 P=$2 T=$3 X=$4; shift 4
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens $T --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run v19 1,128,512,1024 256 $O X=1; run om3 1,128,512,1024 256 $B X=1; run om0 1,128,512,1024 256 $B QK_MEGAKERNEL_O_MERGE=0; run om2 1,128,512,1024 256 $B QK_MEGAKERNEL_O_MERGE=2
done
for i in 1 2; do run w-om3 8,64,120,176 32 $B X=1; run w-om0 8,64,120,176 32 $B QK_MEGAKERNEL_O_MERGE=0; done
echo "t=$(( $(date +%s) - START ))s"
