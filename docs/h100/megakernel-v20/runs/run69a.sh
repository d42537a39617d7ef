#!/usr/bin/env bash
# Device run 69a (v20 candidate: the GEMV dots on the tensor cores, mma_pair): GPU tests; ids (10 greedy repeats,
# sampled, 400 tokens); A/B against v19 (4625c9c's addon, carried as .device/v19.node.xz), 3 rounds alternating, 0.6B
# at positions 1/128/512/1024; 8B at 1/1024, one round; 32-token windows at 1 and 2 chunks per head.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v19.node.xz > /tmp/o/bundle/qk_cuda.node
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r69a; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r69a.tgz -C /tmp r69a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed|failed" -A3 $R/megakernel-test.txt | head -16)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v19: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v19: d7460a19)"
timeout 60 $N $B generate --preset 0.6b --engine layered --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/layered.json 2>/dev/null; echo "layered greedy rc=$? $(ids $R/layered.json)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
echo "ids t=$(( $(date +%s) - START ))s"
run() {  # name, positions, tokens, bundle, env...
  local v=$1 P=$2 T=$3 X=$4; shift 4
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens $T --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run v19 1,128,512,1024 256 $O X=1; run mma 1,128,512,1024 256 $B X=1
done
for i in 1 2; do run w-v19 8,64,120 32 $O X=1; run w-mma 8,64,120 32 $B X=1; done
run8() {
  local v=$1 X=$2
  timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 64 --runs 3 --no-peers --no-layered --markdown $R/ab8-$v.md > $R/ab8-$v.log 2>&1
  echo "8b $v rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
run8 v19 $O; run8 mma $B
echo "t=$(( $(date +%s) - START ))s"
