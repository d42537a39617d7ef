#!/usr/bin/env bash
# Device run 66f (v17 = 062e4e6): the 8B sweep with HF static + CUDA graph in the same run, on a random checkpoint
# written by qk model init.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -f /tmp/b/bundle/qk.mjs ] || { rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle-p1.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r66f; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66f.tgz -C /tmp r66f' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
timeout 360 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| megakernel|^Copy ceiling|^Peer" $R/decode8b.md | head -8
rm -rf /tmp/ref8
echo "t=$(( $(date +%s) - START ))s"
