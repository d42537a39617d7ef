#!/usr/bin/env bash
# Device run 60j (v11 final build): 8B against HF transformers on the same random checkpoint (qk model init), and
# compute-sanitizer racecheck with a longer bound.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -d /tmp/b/bundle ] || { mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r60j; REP=$R/report; mkdir -p $R $REP
trap 'tar -czf $OUT/r60j.tgz -C /tmp r60j' EXIT
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 240 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(( $(date +%s) - START ))s"
timeout 280 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --positions 1,1024 --tokens 128 --runs 3 --name decode-8b-hf --report $REP > $R/decode-8b-hf.md 2> $R/decode-8b-hf.err; echo "8b hf rc=$? $(( $(date +%s) - START ))s"; grep -E "^\| (megakernel)" $R/decode-8b-hf.md | head -4
echo "t=$(( $(date +%s) - START ))s"
