#!/usr/bin/env bash
# Device run 62e (v13): the producer issues each copy the moment the previous one lands (bookkeeping before the wait):
# 688b222 (base) against the draft (alt-pp), alternating, 2 rounds; ids; modes 36/4 and traces of the draft; SASS.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-pp.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62e; mkdir -p $R
trap 'tar -czf $OUT/r62e.tgz -C /tmp r62e' EXIT
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>$R/greedy.err; echo "greedy rc=$? $(ids $R/greedy.json) (v10: aa30529c)"
for i in 1 2; do for v in base pp; do X=$B; [ $v = pp ] && X=$O
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
for m in 36 4; do
  QK_MEGAKERNEL_DEBUG=$m timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 1,128 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/pp-m$m.md > $R/pp-m$m.log 2>&1
  echo "pp mode $m rc=$? $(grep -E '^\| megakernel position' $R/pp-m$m.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done
for m in 0 36; do
  QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-pp-m$m.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 10 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-pp-m$m.log 2>&1; echo "trace m$m rc=$?"
done
gzip $R/*.json
for v in b o; do cuobjdump -sass /tmp/$v/bundle/qk_cuda.node 2>/dev/null | awk '/Function :/{p = ($0 ~ /decode_kernelILb0ELi2E/)} p' | xz -T4 > $R/sass-$v.txt.xz; done
ls -la $R/sass-*; echo "t=$(( $(date +%s) - START ))s"
