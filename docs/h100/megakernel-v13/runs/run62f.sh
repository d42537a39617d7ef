#!/usr/bin/env bash
# Device run 62f (v13, diagnostic build alt-diag = the producer draft pp + wait accounting under debug bit 128):
# per-block GEMV busy time (waits for tiles after the first removed) and the producer's waits per step (ring full,
# copy in flight), at positions 10 and 125, modes 128 (real) and 164 (no copies, no dot products).
set -u
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-diag.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; O=/tmp/o/bundle/qk.mjs; R=/tmp/r62f; mkdir -p $R
trap 'tar -czf $OUT/r62f.tgz -C /tmp r62f' EXIT
for p in 10 125; do for m in 0 128 164; do
  QK_MEGAKERNEL_DEBUG=$m QK_MEGAKERNEL_TRACE=$R/trace-p$p-m$m.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions $p --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-p$p-m$m.log 2>&1; echo "trace p$p m$m rc=$?"
done; done
QK_MEGAKERNEL_DEBUG=128 QK_MEGAKERNEL_SLOT_KB=28 QK_MEGAKERNEL_TRACE=$R/trace-p10-m128-s28.json timeout 90 $N $O bench decode --preset 0.6b --engines megakernel --positions 10 --tokens 64 --runs 1 --no-peers --no-layered > $R/trace-s28.log 2>&1; echo "trace s28 rc=$?"
gzip $R/*.json
