#!/usr/bin/env bash
# Device run 60a (v11): the gather that re-polls every pending word together, A/B against v10 (the same bundle with
# v10's addon), alternating; GPU tests; greedy/sampled ids (must equal v9/v10's: the values are unchanged).
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-v10.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r60a; mkdir -p $R
trap 'tar -czf $OUT/r60a.tgz -C /tmp r60a' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled.json 2>/dev/null; echo "sampled rc=$? $(ids $R/sampled.json) (v10: dc211a68)"
for i in 1 2 3; do for v in v10 new; do X=$B; [ $v = v10 ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --markdown $R/ab-$v-$i.md --json $R/ab-$v-$i.json > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s/%s ", $2, $4, $8}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
for v in v10 new; do X=$B; [ $v = v10 ] && X=$O
  timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 128 --runs 3 --no-peers --markdown $R/ab8-$v.md --json $R/ab8-$v.json > $R/ab8-$v.log 2>&1
  echo "8b $v rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v.md | awk -F'|' '{printf "%s=%s/%s ", $2, $4, $8}')"
done
echo "t=$(( $(date +%s) - START ))s"
cp .device/gputest/megakernel-test.mjs .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -12)
echo "t=$(( $(date +%s) - START ))s"
