#!/usr/bin/env bash
# Device run 64a (v15): a trace at position 1024; the attention-split and L2-policy knobs against HEAD (aa06182).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r64a; mkdir -p $R
trap 'tar -czf $OUT/r64a.tgz -C /tmp r64a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
QK_MEGAKERNEL_TRACE=$R/trace-p1024.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions 1024 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-p1024.log 2>&1; echo "trace rc=$? $(( $(date +%s) - START ))s"
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v.md > $R/ab-$v.log 2>&1
  echo "$v rc=$? $(grep -E '^\| megakernel position' $R/ab-$v.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
}
run head $O X=1
run exp $B X=1
run k32s $B QK_MEGAKERNEL_L2_KEEP_MB=32 QK_MEGAKERNEL_L2_SETASIDE_MB=40
run k32 $B QK_MEGAKERNEL_L2_KEEP_MB=32
run st $B QK_MEGAKERNEL_L2_STREAM=1
run stk32s $B QK_MEGAKERNEL_L2_STREAM=1 QK_MEGAKERNEL_L2_KEEP_MB=32 QK_MEGAKERNEL_L2_SETASIDE_MB=40
run o112 $B QK_MEGAKERNEL_ONE_CHUNK_UNTIL=112
run o168 $B QK_MEGAKERNEL_ONE_CHUNK_UNTIL=168
run al $B QK_MEGAKERNEL_CHUNK_ALIGN=1
run c8 $B QK_MEGAKERNEL_CHUNK_CAP=8
run c8al $B QK_MEGAKERNEL_CHUNK_CAP=8 QK_MEGAKERNEL_CHUNK_ALIGN=1
run head2 $O X=1
run exp2 $B X=1
echo "t=$(( $(date +%s) - START ))s"
