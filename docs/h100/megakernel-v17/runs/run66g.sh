#!/usr/bin/env bash
# Device run 66g (v17 = 062e4e6): the ring knobs again with the cheaper dot loops: slot size for every position
# (QK_MEGAKERNEL_SLOT_KB 24 / 28 / 32, which also turns off the short-context ring) and two copies in flight, against
# the default (28 KB slots below position 512, 20 KB from there; one copy in flight), alternating, 3 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
[ -f /tmp/b/bundle/qk.mjs ] || { rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle-p1.tar.xz -C /tmp/b; }
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r66g; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66g.tgz -C /tmp r66g' EXIT
run() {  # name, env...
  local v=$1; shift
  env "$@" timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run default X=1; run slot24 QK_MEGAKERNEL_SLOT_KB=24; run slot28 QK_MEGAKERNEL_SLOT_KB=28; run slot32 QK_MEGAKERNEL_SLOT_KB=32; run inflight2 QK_MEGAKERNEL_INFLIGHT=2; done
