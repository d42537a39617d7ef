#!/usr/bin/env bash
# Device run 68a (v19, H100): the candidate build (LM head's own bound on copies in flight, QK_MEGAKERNEL_LM_INFLIGHT)
# against v18's landed addon, and host knobs retuned on it, 3 rounds alternating; the cost per chunk regime (32-token
# windows); diagnostic modes at positions 1 and 128; traces at positions 1 and 200; correctness of the candidate.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v18.node.xz > /tmp/o/bundle/qk_cuda.node
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r68a; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68a.tgz -C /tmp r68a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
# Correctness of the candidate first (default knobs, then the LM head at 2 copies in flight).
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel test rc=$? $(grep -cE '✓|passed' $R/megakernel-test.txt)"; tail -4 $R/megakernel-test.txt)
for lm in 1 2; do
  QK_MEGAKERNEL_LM_INFLIGHT=$lm timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-lm$lm.json 2>/dev/null; echo "greedy lm$lm rc=$? $(ids $R/greedy-lm$lm.json) (v9-v18: aa30529c)"
  QK_MEGAKERNEL_LM_INFLIGHT=$lm timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled-lm$lm.json 2>/dev/null; echo "sampled lm$lm rc=$? $(ids $R/sampled-lm$lm.json) (v10-v18: dc211a68)"
done
run() {  # name, positions, bundle, env...
  local v=$1 P=$2 X=$3; shift 3
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
P=1,128,512,1024
for i in 1 2 3; do
  run v18 $P $O X=1; run v19 $P $B X=1; run lm2 $P $B QK_MEGAKERNEL_LM_INFLIGHT=2; run lm3 $P $B QK_MEGAKERNEL_LM_INFLIGHT=3
  run skip8 $P $B QK_MEGAKERNEL_SKIP_ITEMS=8; run skip33 $P $B QK_MEGAKERNEL_SKIP_ITEMS=33; run ck84 $P $B QK_MEGAKERNEL_CHUNK_KEYS=84
  run steps16 $P $B QK_MEGAKERNEL_STEPS=16
done
# The cost per chunk regime: 32-token windows (1 chunk per KV head up to 55 keys, then one more every 56).
for i in 1 2; do
  timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 8,64,120,176,232,288,344 --tokens 32 --runs 3 --no-peers --no-layered --markdown $R/windows-$i.md > $R/windows-$i.log 2>&1
  echo "windows $i rc=$? $(grep -E '^\| megakernel position' $R/windows-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g')"
done
# Diagnostic modes (outputs wrong by design: 4 no dot products, 8 no input gathers, 36 no copies and no dots, 1 no waits).
for m in 4 8 36 1; do
  QK_MEGAKERNEL_DEBUG=$m timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/mode$m.md > $R/mode$m.log 2>&1
  echo "mode $m rc=$? $(grep -E '^\| megakernel position' $R/mode$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g')"
done
# Traces (one step per launch while tracing).
for p in 1 200; do
  QK_MEGAKERNEL_TRACE=$R/trace-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-p$p.log 2>&1; echo "trace $p rc=$?"
  xz -9 $R/trace-p$p.json 2>/dev/null
done
echo "t=$(( $(date +%s) - START ))s"
