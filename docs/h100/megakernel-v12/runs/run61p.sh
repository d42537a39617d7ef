#!/usr/bin/env bash
# Device run 61p (v12 final build, 688b222): 8B A/B against 5a12b44 (alternating, positions 1 and 1024); compute-sanitizer
# synccheck and racecheck on 4-token decodes.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-final.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r61p; mkdir -p $R
trap 'tar -czf $OUT/r61p.tgz -C /tmp r61p' EXIT
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $CS --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 250 $CS --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(( $(date +%s) - START ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
for i in 1 2; do for v in final new; do X=$B; [ $v = final ] && X=$O
  timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --no-layered --markdown $R/ab8-$v-$i.md > $R/ab8-$v-$i.log 2>&1
  echo "8b $v $i rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
echo "t=$(( $(date +%s) - START ))s"
