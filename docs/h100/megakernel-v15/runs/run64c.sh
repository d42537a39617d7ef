#!/usr/bin/env bash
# Device run 64c (v15): traces with evict_first weights (positions 1, 128, 1024; 1024 with debug 64); the flagged merge of up to 16 chunks and two-pass chunks up to 896 keys, 3 rounds against HEAD.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r64c; mkdir -p $R
trap 'tar -czf $OUT/r64c.tgz -C /tmp r64c' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
S=QK_MEGAKERNEL_L2_STREAM
for p in 1 128 1024; do
  env $S=1 QK_MEGAKERNEL_TRACE=$R/trace-st-p$p.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-st-p$p.log 2>&1; echo "trace p$p rc=$?"
done
env $S=1 QK_MEGAKERNEL_DEBUG=64 QK_MEGAKERNEL_TRACE=$R/trace-st-d64-p1024.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1024 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-st-d64-p1024.log 2>&1; echo "trace d64 rc=$?"
env $S=1 QK_MEGAKERNEL_FLAG_MERGE_MAX=16 QK_MEGAKERNEL_DEBUG=64 QK_MEGAKERNEL_TRACE=$R/trace-stf16-d64-p1024.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1024 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-stf16-d64-p1024.log 2>&1; echo "trace f16 d64 rc=$?"
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,768,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
P2="QK_MEGAKERNEL_CHUNK_CAP=8 QK_MEGAKERNEL_CHUNK_ALIGN=1 QK_MEGAKERNEL_CHUNK_CAP_UNTIL=896"
for i in 1 2 3; do
  run head $O X=1
  run st $B $S=1
  run stp2 $B $S=1 $P2
  run stf16 $B $S=1 QK_MEGAKERNEL_FLAG_MERGE_MAX=16
  run stf16al $B $S=1 QK_MEGAKERNEL_FLAG_MERGE_MAX=16 QK_MEGAKERNEL_CHUNK_ALIGN=1
  run stp2f16 $B $S=1 QK_MEGAKERNEL_FLAG_MERGE_MAX=16 $P2
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (aa30529c)"
echo "t=$(( $(date +%s) - START ))s"
