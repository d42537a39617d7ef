#!/usr/bin/env bash
# Device run 68c (v19, H100, after 68b on the same machine): Qwen3-8B shapes with the LM head at one and at two copies
# in flight, alternating, 2 rounds; the 8B sweep with HF static + CUDA graph in the same run; 1.7B and 4B against the
# layered engine.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r68c; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68c.tgz -C /tmp r68c' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
for i in 1 2; do
  for lm in 1 2; do
    QK_MEGAKERNEL_LM_INFLIGHT=$lm timeout 150 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --no-peers --positions 1,1024 --tokens 128 --runs 3 --markdown $R/ab8-lm$lm-$i.md > $R/ab8-lm$lm-$i.log 2>&1
    echo "8b lm$lm $i rc=$? $(grep -E '^\| megakernel position' $R/ab8-lm$lm-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
  done
done
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
for m in 1.7b 4b; do
  timeout 100 $N $B bench decode --preset $m --engines layered,megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --markdown $R/decode$m.md > $R/decode$m.log 2>&1; echo "$m rc=$? $(( $(date +%s) - START ))s"
  grep -E "^\| (layered|megakernel)" $R/decode$m.md | cut -c1-90 | head -6
done
echo "t=$(( $(date +%s) - START ))s"
