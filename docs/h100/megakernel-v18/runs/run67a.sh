#!/usr/bin/env bash
# Device run 67a (v18 candidate: QKV in four-row turns, the spread chunk merge, the KV-prefetch knob): GPU tests; ids
# (short, and long prompts through 9-16 chunks against v17); sanitizers (4-token decode, and racecheck at ~1,100 keys);
# v17 against v18 and its knobs at positions 1-1024, 3 rounds; traces at positions 1 and 1024.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v17.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r67a; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r67a.tgz -C /tmp r67a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -14)
(cd /tmp/b/bundle && timeout 150 $N layered-test.mjs > $R/layered-test.txt 2>&1; echo "layered tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/layered-test.txt | head -6)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v9-v17: aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v17: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v17: d7460a19)"
L500=$(for i in $(seq 1 500); do printf 'sea '; done)
L1100=$(for i in $(seq 1 1100); do printf 'sea '; done)
for v in v17 v18; do
  X=$B; [ $v = v17 ] && X=$O
  timeout 90 $N $X generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "$L500" > $R/long500-$v.json 2>/dev/null; echo "long500 $v rc=$? $(ids $R/long500-$v.json) $(grep -o '"promptTokens":[0-9]*' $R/long500-$v.json)"
  timeout 90 $N $X generate --preset 0.6b --engine megakernel --max-tokens 250 --temperature 0 --json "$L1100" > $R/long1100-$v.json 2>/dev/null; echo "long1100 $v rc=$? $(ids $R/long1100-$v.json) $(grep -o '"promptTokens":[0-9]*' $R/long1100-$v.json)"
done
echo "t=$(( $(date +%s) - START ))s"
QK_MEGAKERNEL_TRACE=$R/trace-v18-p1.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-v18-p1.log 2>&1; echo "trace rc=$?"
QK_MEGAKERNEL_TRACE=$R/trace-v18-p1024.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1024 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-v18-p1024.log 2>&1; echo "trace rc=$?"
QK_MEGAKERNEL_TRACE=$R/trace-v17-p1.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 1 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-v17-p1.log 2>&1; echo "trace rc=$?"
QK_MEGAKERNEL_TRACE=$R/trace-v17-p1024.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 1024 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-v17-p1024.log 2>&1; echo "trace rc=$? $(( $(date +%s) - START ))s"
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run v17 $O X=1
  run v18 $B X=1
  run q0 $B QK_MEGAKERNEL_QKV_QUADS=0
  run pf1 $B QK_MEGAKERNEL_KV_PREFETCH=1
  run pf2 $B QK_MEGAKERNEL_KV_PREFETCH=2
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 240 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 3 --temperature 0 --json "$L1100" > $R/racecheck-long.txt 2>&1; echo "racecheck long rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-long.txt | head -3
echo "t=$(( $(date +%s) - START ))s"
