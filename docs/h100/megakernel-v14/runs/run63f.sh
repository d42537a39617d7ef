#!/usr/bin/env bash
# Device run 63f (v14 final build, 939bf07): HF agreement (seed-0 checkpoint, 256 teacher-forced steps) and the 0.6B
# sweep with HF peers on that checkpoint.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r63f; REP=$R/report; mkdir -p $R $REP
P=/tmp/b/bundle/peers/hf_reference.py
trap 'tar -czf $OUT/r63f.tgz -C /tmp r63f' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
(cd /tmp && timeout 150 python3 $P /tmp/ref06 --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 > $R/hfref.txt 2>&1; echo "hfref rc=$? $(( $(date +%s) - START ))s")
for e in megakernel layered; do
  timeout 60 $N $B model compare /tmp/ref06 --engine $e --json $R/cmp-$e.json > $R/cmp-$e.md 2>&1; echo "compare $e rc=$? $(tail -1 $R/cmp-$e.md) $(( $(date +%s) - START ))s"
done
timeout 320 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --report $REP > $R/decode.md 2> $R/decode.err; echo "decode rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (layered|megakernel)" $R/decode.md | head -14
echo "t=$(( $(date +%s) - START ))s"
