#!/usr/bin/env bash
# Device run 68b (v19, H100, the LM head at two copies in flight by default): GPU tests (megakernel, layered);
# greedy, sampled, 400-token and long-prompt ids; 10
# greedy repeats; compute-sanitizer synccheck and racecheck (4-token decode) and racecheck at ~1,100 keys; the 0.6B
# sweep with HF static + CUDA graph in the same run (qk model init checkpoint).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r68b; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68b.tgz -C /tmp r68b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -14)
(cd /tmp/b/bundle && timeout 150 $N layered-test.mjs > $R/layered-test.txt 2>&1; echo "layered tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/layered-test.txt | head -6)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v18: dc211a68)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "Tell me about the sea" > $R/greedy400.json 2>/dev/null; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v18: d7460a19)"
L500=$(for i in $(seq 1 500); do printf 'sea '; done)
L1100=$(for i in $(seq 1 1100); do printf 'sea '; done)
timeout 90 $N $B generate --preset 0.6b --engine megakernel --max-tokens 400 --temperature 0 --json "$L500" > $R/long500.json 2>/dev/null; echo "long500 rc=$? $(ids $R/long500.json) (v17-v18: df4f46d5)"
timeout 90 $N $B generate --preset 0.6b --engine megakernel --max-tokens 250 --temperature 0 --json "$L1100" > $R/long1100.json 2>/dev/null; echo "long1100 rc=$? $(ids $R/long1100.json) (v17-v18: 4b321e1a)"
for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/repeat-$i.json 2>/dev/null; echo "repeat rc=$? $(ids $R/repeat-$i.json)"; done | tee $R/repeats.txt | sort | uniq -c
echo "(aa30529c expected) t=$(( $(date +%s) - START ))s"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 3 --temperature 0 --json "$L1100" > $R/racecheck-long.txt 2>&1; echo "racecheck long rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-long.txt | head -3
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(( $(date +%s) - START ))s"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| (layered|megakernel)|^Copy ceiling|ceiling" $R/decode06.md | head -14
echo "t=$(( $(date +%s) - START ))s"
