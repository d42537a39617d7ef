#!/usr/bin/env bash
# Device run 68i: the megakernel GPU tests after the test refactor of expectClose (the same assertions), on run 68h's
# bundle (the addon is unchanged since).
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
R=/tmp/r68i; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r68i.tgz -C /tmp r68i' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
(cd /tmp/b/bundle && timeout 200 /tmp/node megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "megakernel tests rc=$?"; grep -E "FAIL|passed" -A3 $R/megakernel-test.txt | head -8)
