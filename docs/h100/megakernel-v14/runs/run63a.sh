#!/usr/bin/env bash
# Device run 63a (v14): a bound on weight bytes in flight per block (QK_MEGAKERNEL_INFLIGHT_KB), with up to 4 copies
# (QK_MEGAKERNEL_INFLIGHT=4), against one copy in flight (the new build's default) and the v13 build (alt-old).
# 0.6B preset, alternating, 2 rounds, µs per token at 1 / 128 / 512 / 1024; greedy ids of each.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-old.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r63a; mkdir -p $R
trap 'tar -czf $OUT/r63a.tgz -C /tmp r63a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
}
for i in 1 2; do
  run old $O X=1
  run new $B X=1
  run b24 $B QK_MEGAKERNEL_INFLIGHT=4 QK_MEGAKERNEL_INFLIGHT_KB=24
  run b32 $B QK_MEGAKERNEL_INFLIGHT=4 QK_MEGAKERNEL_INFLIGHT_KB=32
  run b40 $B QK_MEGAKERNEL_INFLIGHT=4 QK_MEGAKERNEL_INFLIGHT_KB=40
  run b48 $B QK_MEGAKERNEL_INFLIGHT=4 QK_MEGAKERNEL_INFLIGHT_KB=48
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for v in new b32; do E="X=1"; [ $v = b32 ] && E="QK_MEGAKERNEL_INFLIGHT=4 QK_MEGAKERNEL_INFLIGHT_KB=32"
  env $E timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-$v.json 2>/dev/null; echo "greedy $v rc=$? $(ids $R/greedy-$v.json) (aa30529c)"
done
echo "t=$(( $(date +%s) - START ))s"
