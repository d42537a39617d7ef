#!/usr/bin/env bash
# Device run 69b (v20 candidate: flagged-word waits that sleep between polls, QK_MEGAKERNEL_POLL_SLEEP_NS): ids with
# the knob on; A/B against v19 (4625c9c's addon) and the knob at 0 / 64 / 128 / 256 / 512 ns, 3 rounds alternating,
# 0.6B at positions 1/128/512/1024; 32-token windows at 1 and 2 chunks per head.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v19.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r69b; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r69b.tgz -C /tmp r69b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
for s in 0 128 512; do QK_MEGAKERNEL_POLL_SLEEP_NS=$s timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-s$s.json 2>/dev/null; echo "greedy sleep $s rc=$? $(ids $R/greedy-s$s.json) (v9-v19: aa30529c)"; done
run() {  # name, positions, tokens, bundle, env...
  local v=$1 P=$2 T=$3 X=$4; shift 4
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens $T --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do
  run v19 1,128,512,1024 256 $O X=1
  for s in 0 64 128 256 512; do run s$s 1,128,512,1024 256 $B QK_MEGAKERNEL_POLL_SLEEP_NS=$s; done
done
for i in 1 2; do for s in 0 128 256; do run w-s$s 8,64,120 32 $B QK_MEGAKERNEL_POLL_SLEEP_NS=$s; done; done
echo "t=$(( $(date +%s) - START ))s"
