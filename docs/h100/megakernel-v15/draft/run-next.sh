#!/usr/bin/env bash
# A device run for the next session (not run yet): the kv-stage draft, and the v15 sweep with its HF peer.
# Prepare, on the build machine:
#   git apply docs/h100/megakernel-v15/draft/kv-stage.patch
#   npx --yes pnpm@10.34.8 run bundle -- --out /tmp/qkbundle/bundle && (cd /tmp/qkbundle && tar -cf - bundle | xz -T2 -6 > .device/bundle.tar.xz)
#   node tooling/scripts/gpu-test-bundle.mjs .device/gputest/megakernel-test.mjs packages/qwen3/test/megakernel-engine.test.ts
# then run this script with `.device` carried. One build serves both sides of the A/B (QK_MEGAKERNEL_KV_STAGE=0/1);
# the draft changes the attention's code, so compare against the landed build too (alt-head.node.xz) and search the
# placement padding again if it pays.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=$OUT/r65a; mkdir -p $R
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 300 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$?"; grep -E "FAIL|passed" $R/megakernel-test.txt | head)
for i in 1 2 3; do for s in 0 1; do
  QK_MEGAKERNEL_KV_STAGE=$s timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,512,1024,1280 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-s$s-$i.md > /dev/null 2>&1
  echo "stage=$s $i $(grep -E '^\| megakernel position' $R/ab-s$s-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}') $(( $(date +%s) - START ))s"
done; done
# The sweep with HF static+graph measured in the same run (eager left out: it costs most of the time).
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init.txt 2>&1; echo "init rc=$?"
timeout 400 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md > $R/decode06.log 2>&1; echo "sweep rc=$? $(( $(date +%s) - START ))s"
grep -E "^\| (layered|megakernel)" $R/decode06.md
