#!/usr/bin/env bash
# Device run 66e (v17 = 062e4e6): the 0.6B sweep with HF static + CUDA graph in the same run (qk model init
# checkpoint), then the 8B sweep the same way; 1.7B and 4B against the layered engine.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -f /tmp/b/bundle/qk.mjs ] || { rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle-p1.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r66e; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66e.tgz -C /tmp r66e' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(( $(date +%s) - START ))s"
timeout 330 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
for m in 1.7b 4b; do
  timeout 100 $N $B bench decode --preset $m --engines layered,megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --markdown $R/decode$m.md > $R/decode$m.log 2>&1; echo "$m rc=$? $(( $(date +%s) - START ))s"
  grep -E "^\| (layered|megakernel)" $R/decode$m.md | head -6
done
echo "t=$(( $(date +%s) - START ))s"
