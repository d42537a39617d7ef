#!/usr/bin/env bash
# Device run 67d (v18, H100, after 67c on the same machine): v17 against v18 at positions 1-4096, 3 rounds; v18 with
# QKV by pairs (QK_MEGAKERNEL_QKV_QUADS=0) and with the v17 prefetch (QK_MEGAKERNEL_KV_PREFETCH=1), 2 rounds; the 8B
# sweep with HF static + CUDA graph in the same run; 1.7B and 4B against the layered engine.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v17.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r67d; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r67d.tgz -C /tmp r67d' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
run() {  # name, positions, bundle, env...
  local v=$1 P=$2 X=$3; shift 3
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run v17 1,128,512,1024,2048,4096 $O X=1; run v18 1,128,512,1024,2048,4096 $B X=1; done
for i in 4 5; do run q0 1,128,512,1024 $B QK_MEGAKERNEL_QKV_QUADS=0; run pf1 1,128,512,1024 $B QK_MEGAKERNEL_KV_PREFETCH=1; run v18 1,128,512,1024 $B X=1; done
for m in 1.7b 4b; do
  timeout 100 $N $B bench decode --preset $m --engines layered,megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --markdown $R/decode$m.md > $R/decode$m.log 2>&1; echo "$m rc=$? $(( $(date +%s) - START ))s"
  grep -E "^\| (layered|megakernel)" $R/decode$m.md | cut -c1-90 | head -6
done
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
echo "t=$(( $(date +%s) - START ))s"
