#!/usr/bin/env bash
# Device run 62p (v13 final build, 08fcd7b): GPU tests; ids; 10 greedy repeats; HF agreement; 0.6B sweep with HF peers; 8B sweep
# (HF checkpoint, seed 0).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r62p; REP=$R/report; mkdir -p $R $REP
P=/tmp/b/bundle/peers/hf_reference.py
trap 'tar -czf $OUT/r62p.tgz -C /tmp r62p' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
cat /tmp/b/bundle/build-info.json > $R/build-info.json
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CO -sass /tmp/b/bundle/qk_cuda.node 2>/dev/null | awk '/Function : .*qwen3_decode_kernelILb0ELi2E/{p=1} p&&/Function : /&&!/qwen3_decode_kernelILb0ELi2E/{p=0} p' > $R/sass-08fcd7b.txt
xz -6 $R/sass-08fcd7b.txt
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
(cd /tmp/b/bundle && timeout 120 $N layered-test.mjs > $R/layered-test.txt 2>&1; echo "layered tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/layered-test.txt | head -6)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
(cd /tmp && timeout 150 python3 $P /tmp/ref06 --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 > $R/hfref.txt 2>&1; echo "hfref rc=$? $(( $(date +%s) - START ))s")
for e in megakernel layered; do
  timeout 60 $N $B model compare /tmp/ref06 --engine $e --json $R/cmp-$e.json > $R/cmp-$e.md 2>&1; echo "compare $e rc=$? $(tail -1 $R/cmp-$e.md)"
done
echo "t=$(( $(date +%s) - START ))s"
timeout 330 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --report $REP > $R/decode.md 2> $R/decode.err; echo "decode rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (layered|megakernel)" $R/decode.md | head -14
echo "t=$(( $(date +%s) - START ))s"
timeout 200 $N $B bench decode --preset 8b --engines megakernel --positions 1,128,1024,2048 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/decode8b.md > $R/decode8b.log 2>&1; echo "8b rc=$? $(grep -E '^\| megakernel position' $R/decode8b.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
grep -E "^\| megakernel" $R/decode8b.md | head -5
echo "t=$(( $(date +%s) - START ))s"
