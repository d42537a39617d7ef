#!/usr/bin/env bash
# Device run 63k (v14): the dot loop unrolled 4 (HEAD), 6, 8 or 12 times at the O/down site (one build; QK_UNROLL picks the
# greedy G=2 kernel) against 6a33464 (alt-head, the 939bf07 kernel); 0.6B preset, alternating, 3 rounds; ids.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r63k; mkdir -p $R
trap 'tar -czf $OUT/r63k.tgz -C /tmp r63k' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run head $O X=1
  for v in 4 6 8 12; do run u$v $B QK_UNROLL=$v; done
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
QK_UNROLL=8 timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (dc211a68)"
echo "t=$(( $(date +%s) - START ))s"
