#!/usr/bin/env bash
# Device run 63j (v14, 939bf07 kernel at 6a33464): 8B against HF transformers on the same random checkpoint (qk model
# init), and 0.6B at positions 2048 and 4096 against 3cd409a (alt-old, v13), alternating, 2 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-old.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r63j; REP=$R/report; mkdir -p $R $REP
trap 'tar -czf $OUT/r63j.tgz -C /tmp r63j' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
for i in 1 2; do for v in old new; do X=$B; [ $v = old ] && X=$O
  timeout 120 $N $X bench decode --preset 0.6b --engines megakernel --positions 2048,4096 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --positions 1,1024 --tokens 128 --runs 3 --name decode-8b-hf --report $REP > $R/decode-8b-hf.md 2> $R/decode-8b-hf.err; echo "8b hf rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (megakernel)" $R/decode-8b-hf.md | head -4
echo "t=$(( $(date +%s) - START ))s"
