#!/usr/bin/env bash
# Device run 65a (v16 experiment build: the kv-stage draft + QK_MEGAKERNEL_CHUNK_KEYS + QK_PAD + produce_stage's copies
# folded into one hinted path): GPU tests; ids; A/B against the landed v15 build (alt-head, 9687509), 3 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-head.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r65a; mkdir -p $R
trap 'tar -czf $OUT/r65a.tgz -C /tmp r65a' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 300 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -14)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
gen() {  # name, env...
  local v=$1; shift
  env "$@" timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400-$v.json 2>/dev/null; echo "greedy 400 $v rc=$? $(ids $R/greedy400-$v.json) (v12: d7460a19)"
}
gen s1 QK_MEGAKERNEL_KV_STAGE=1
gen s0 QK_MEGAKERNEL_KV_STAGE=0
gen s1c84 QK_MEGAKERNEL_CHUNK_KEYS=84
run() {  # name, bundle, env...
  local v=$1 X=$2; shift 2
  env "$@" timeout 120 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024,1280 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run head $O X=1
  run s0 $B QK_MEGAKERNEL_KV_STAGE=0
  run s1 $B QK_MEGAKERNEL_KV_STAGE=1
  run s1c84 $B QK_MEGAKERNEL_KV_STAGE=1 QK_MEGAKERNEL_CHUNK_KEYS=84
  run s1p576 $B QK_PAD=576
  run s1p656 $B QK_PAD=656
  run s1p816 $B QK_PAD=816
  run s1p896 $B QK_PAD=896
done
echo "t=$(( $(date +%s) - START ))s"
