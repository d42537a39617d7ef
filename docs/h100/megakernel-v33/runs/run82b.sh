#!/usr/bin/env bash
# Device run 82b (v33): the keys-split staged attention with its epilogue branch-free (the B columns hold query
# (c >> 1) & 1) and one reciprocal per lane for HF's division: the division probe (weight_div's zero weights now take
# its fast path), GPU tests, ids, 2 alternating rounds against v32's landed build at positions 1, 128, 512 and 1024;
# then the placement search of a QK_MEGAKERNEL_PAD_SEARCH=1 build (.device/search.node.xz): the kernel with both
# paths at 512 and 1024 and the staged kernel at 128, each padding once per round; Nsight Compute source counters of
# the staged kernel at ~260 keys last.
. "$(dirname "$0")/lib.sh"
run_setup r82b baseline
mkdir -p /tmp/s && cp -r /tmp/b/bundle /tmp/s/bundle && xz -dc .device/search.node.xz > /tmp/s/bundle/qk_cuda.node
S=/tmp/s/bundle/qk.mjs
div_probe
gpu_tests
path_ids new $B X=1
pack
rounds 2 1,128,512,1024 256 "v32 $O X=1" "new $B X=1"
pack
PADS="0 128 256 384 493 512 640 736 768 896 1024 1152 1280 1408 1536 1664 1792 1920"
for i in 1 2; do
  ab v32 512,1024 256 $O X=1
  for p in $PADS; do ab both$p 512,1024 256 $S QK_MEGAKERNEL_PAD_BOTH=$p; done
  pack
done
for i in 1 2; do
  ab v32 128 256 $O X=1
  for p in $PADS; do ab staged$p 128 256 $S QK_MEGAKERNEL_PAD=$p; done
  pack
done
ncu_source 200
pack
echo "t=$(elapsed)"
