#!/usr/bin/env bash
# Device run 67b (H100): the v18 candidate with placement instances (QK_PAD) and the KV-prefetch knob (0-3) against
# v17: GPU tests; positions 1-1024, 3 rounds; 2048 and 4096, 2 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v17.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r67b; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r67b.tgz -C /tmp r67b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -14)
run() {  # name, positions, bundle, env...
  local v=$1 P=$2 X=$3; shift 3
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
S=1,128,512,1024
for i in 1 2 3; do
  run v17 $S $O X=1
  run pf0 $S $B X=1
  run pf1 $S $B QK_MEGAKERNEL_KV_PREFETCH=1
  run pf2 $S $B QK_MEGAKERNEL_KV_PREFETCH=2
  run pf3 $S $B QK_MEGAKERNEL_KV_PREFETCH=3
  for p in 496 576 656 816 896; do run pf3pad$p $S $B QK_MEGAKERNEL_KV_PREFETCH=3 QK_PAD=$p; done
done
for i in 4 5; do
  run v17 2048,4096 $O X=1
  run pf0 2048,4096 $B X=1
  run pf2 2048,4096 $B QK_MEGAKERNEL_KV_PREFETCH=2
  run pf3 2048,4096 $B QK_MEGAKERNEL_KV_PREFETCH=3
done
echo "t=$(( $(date +%s) - START ))s"
