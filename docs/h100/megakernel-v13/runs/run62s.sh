#!/usr/bin/env bash
# Device run 62s (v13): the GPU tests, ids and one bench round at the cap that leaves room for static shared memory (HEAD).
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; R=/tmp/r62s; mkdir -p $R
trap 'tar -czf $OUT/r62s.tgz -C /tmp r62s' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$?"; grep -E "FAIL|passed|short-context" $R/megakernel-test.txt | head -8)
cp .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 120 $N layered-test.mjs > $R/layered-test.txt 2>&1; echo "layered tests rc=$?"; grep -E "FAIL|passed" $R/layered-test.txt | head -4)
ids() { grep -o "\"ids\":\[[0-9,]*\]" "$1" | md5sum | cut -c1-8; }
timeout 60 $N /tmp/b/bundle/qk.mjs generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy.json 2>/dev/null; echo "greedy rc=$? $(ids $R/greedy.json) (aa30529c)"
timeout 100 $N /tmp/b/bundle/qk.mjs bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab.md > $R/ab.log 2>&1; echo "bench rc=$? $(grep -E '^\| megakernel position' $R/ab.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
