#!/usr/bin/env bash
# Device run 67f (H100): a draft on top of v18 (the tree of 079735f): the producer holds a copy back while its
# consumers gather a stage input (QK_MEGAKERNEL_HOP_PAUSE=N polls), against the v18 addon: GPU tests and ids with the
# pause on; 2 rounds at positions 1-1024.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/v18.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r67f; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r67f.tgz -C /tmp r67f' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
QK_MEGAKERNEL_HOP_PAUSE=64 timeout 60 $N $B generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy (pause 64) rc=$? $(ids $R/greedy.json) (v9-v18: aa30529c)"
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && QK_MEGAKERNEL_HOP_PAUSE=64 timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests (pause 64) rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -8)
run() {  # name, positions, bundle, env...
  local v=$1 P=$2 X=$3; shift 3
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2; do
  run v18 1,128,512,1024 $O X=1
  run hp0 1,128,512,1024 $B X=1
  for n in 16 64 256; do run hp$n 1,128,512,1024 $B QK_MEGAKERNEL_HOP_PAUSE=$n; done
done
echo "t=$(( $(date +%s) - START ))s"
