# Shared steps of the v31 device runs: v30's (docs/h100/megakernel-v30/runs/lib.sh and the libraries it sources),
# with main's addon before this version (v29's kernels) as the baseline bundle $O (`run_setup NAME baseline`, from
# .device/main.node.xz; set after the sourcing, since v21's library sets BASE_NODE itself: run 80a's baseline failed
# on that). New: `phase_cycles NAME POS ENV…`, the staged attention's phases in cycles (QK_MEGAKERNEL_DEBUG 128 and
# 256) from two stage traces. Sourced by run80*.sh from the repository root.
. docs/h100/megakernel-v30/runs/lib.sh
BASE_NODE=.device/main.node.xz
phase_cycles() {
  local n=$1 p=$2; shift 2
  trace "$n-p$p-d128" "$p" "$@" QK_MEGAKERNEL_DEBUG=128
  trace "$n-p$p-d256" "$p" "$@" QK_MEGAKERNEL_DEBUG=256
  python3 docs/h100/megakernel-v31/phase_cycles.py $R/trace-$n-p$p-d128.json $R/trace-$n-p$p-d256.json | sed "s/^/$n p$p: /"
}
