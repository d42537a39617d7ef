#!/usr/bin/env bash
# Device run 61b (v12): the engine's decode loop without tokenizer/event loop (steptime.mjs), per-token deltas, steps 4 and 64, against bench decode; HEAD 5fb0f5e bundle.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp .device/steptime/steptime.mjs /tmp/b/bundle/
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r61b; mkdir -p $R
trap 'tar -czf $OUT/r61b.tgz -C /tmp r61b' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
for s in 4 64; do
  QK_MEGAKERNEL_STEPS=$s timeout 120 $N /tmp/b/bundle/steptime.mjs 1,128,1024 256 > $R/steptime-s$s.log 2>&1; echo "steptime steps=$s rc=$?"; grep '^pos' $R/steptime-s$s.log
  QK_MEGAKERNEL_STEPS=$s timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/bench-s$s.md > $R/bench-s$s.log 2>&1
  echo "bench steps=$s rc=$? $(grep -E '^\| megakernel position' $R/bench-s$s.md | awk -F'|' '{printf "%s=%s (%s) ", $2, $3, $4}')"
done
echo "t=$(( $(date +%s) - START ))s"
