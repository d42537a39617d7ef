#!/usr/bin/env bash
# Device run 62q (v13): the megakernel GPU tests with the two-ring test comparing three engines (rings by position,
# 20 KB only, 28 KB only), on the 08fcd7b addon (the bundle of run 62p); it failed: see NOTES.md v13.
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; R=/tmp/r62q; mkdir -p $R
trap 'tar -czf $OUT/r62q.tgz -C /tmp r62q' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 220 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$?"; grep -E "FAIL|passed|short-context" $R/megakernel-test.txt | head -8)
cp .device/gputest/layered-test.mjs /tmp/b/bundle/
