#!/usr/bin/env bash
# Device run 62g (v13, diagnostic build alt-diag2): warp 0's cycles per GEMV stage (layers 2-25 summed): waiting
# for tiles, dot loops, reductions + epilogue, total; position 10, modes 128 (real), 132 (no dots), 160 (no
# copies), 164 (neither); 20 and 28 KB slots.
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-diag2.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62g; mkdir -p $R
trap 'tar -czf $OUT/r62g.tgz -C /tmp r62g' EXIT
for kb in 20 28; do for m in 128 132 164; do
  QK_MEGAKERNEL_SLOT_KB=$kb QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-s$kb-m$m.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 10 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-s$kb-m$m.log 2>&1; echo "trace s$kb m$m rc=$?"
done; done
gzip $R/*.json
