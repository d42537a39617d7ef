#!/usr/bin/env bash
# Device run 64b (v15): L2 evict_first for the weight copies (all, layers only, LM head only), with the attention-split knobs; 3 rounds against HEAD (aa06182).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r64b; mkdir -p $R
trap 'tar -czf $OUT/r64b.tgz -C /tmp r64b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1

run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
}
S=QK_MEGAKERNEL_L2_STREAM
for i in 1 2 3; do
  run head $O X=1
  run st $B $S=1
  run st2 $B $S=2
  run st3 $B $S=3
  run stk32 $B $S=1 QK_MEGAKERNEL_L2_KEEP_MB=32
  run stc8al $B $S=1 QK_MEGAKERNEL_CHUNK_CAP=8 QK_MEGAKERNEL_CHUNK_ALIGN=1
  run sto112 $B $S=1 QK_MEGAKERNEL_ONE_CHUNK_UNTIL=112
  run stal $B $S=1 QK_MEGAKERNEL_CHUNK_ALIGN=1
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
QK_MEGAKERNEL_L2_STREAM=1 timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy st rc=$? $(ids $R/greedy.json) (aa30529c)"
echo "t=$(( $(date +%s) - START ))s"
