#!/usr/bin/env bash
# Device run 69e (v20 end: the kernels are v19's, built from 1581699's sources): GPU tests; ids (10 greedy repeats,
# sampled, 400 tokens); the 0.6B sweep with HF static + CUDA graph in the same run; the 8B sweep with HF static + CUDA
# graph.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r69e; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r69e.tgz -C /tmp r69e' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed|failed" -A3 $R/megakernel-test.txt | head -8)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v19: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v19: d7460a19)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(( $(date +%s) - START ))s"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
rm -rf /tmp/ref06
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
echo "t=$(( $(date +%s) - START ))s"
