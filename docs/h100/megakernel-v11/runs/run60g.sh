#!/usr/bin/env bash
# Device run 60g (v11): loads meant to overlap a wait issued as volatile asm (norm weights, attention norm weights, RoPE frequencies, first K/V pass), A/B against b4 (HEAD 5f7e8d6), alternating;
# a trace with the attention's middle stamp moved after its passes (mode 64), positions 1 and 128.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-b4.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r60g; mkdir -p $R
trap 'tar -czf $OUT/r60g.tgz -C /tmp r60g' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
for p in 1 128; do
  QK_MEGAKERNEL_DEBUG=64 QK_MEGAKERNEL_TRACE=$R/trace64-p$p.json timeout 90 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace64-p$p.log 2>&1; echo "trace64 p$p rc=$?"
done
for i in 1 2 3; do for v in b4 new; do X=$B; [ $v = b4 ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
