#!/usr/bin/env bash
# Device run 63b (v14): the layer's code deduplicated (one experimental build, QK_VARIANT picks the greedy G=2
# kernel: 0 = HEAD's structure, 1 = the four GEMV stages in one loop, 2 = two alike halves in one loop, 3 = O and
# down in one loop, attention outside it) against HEAD's build (alt-old). 0.6B preset, alternating, 2 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-old.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r63b; mkdir -p $R
trap 'tar -czf $OUT/r63b.tgz -C /tmp r63b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
(cuobjdump -res-usage /tmp/b/bundle/qk_cuda.node 2>&1 | grep -A1 'qwen3_decode_kernel' > $R/res-usage.txt) || true
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
}
for i in 1 2; do
  run old $O X=1
  for v in 0 1 2 3; do run v$v $B QK_VARIANT=$v; done
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for v in 1 2 3; do
  QK_VARIANT=$v timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-$v.json 2>/dev/null; echo "greedy v$v rc=$? $(ids $R/greedy-$v.json) (aa30529c)"
done
echo "t=$(( $(date +%s) - START ))s"
