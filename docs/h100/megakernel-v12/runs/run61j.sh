#!/usr/bin/env bash
# Device run 61j (v12 final build, 5a12b44): 8B skip-items check (33 = default with claimed tiles, vs 66) at positions
# 128 and 256; 8B sweep (preset, layered beside); compute-sanitizer racecheck / synccheck on short decodes.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -d /tmp/b/bundle ] || { mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61j; REP=$R/report; mkdir -p $R $REP
trap 'tar -czf $OUT/r61j.tgz -C /tmp r61j' EXIT
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 250 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
echo "t=$(( $(date +%s) - START ))s"
