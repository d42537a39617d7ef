# Shared steps of the v33 device runs: v32's (docs/h100/megakernel-v32/runs/lib.sh and the libraries it sources),
# with v32's landed addon as the baseline bundle $O (`run_setup NAME baseline`, from .device/v32.node.xz).
# Sourced by run82*.sh from the repository root.
. docs/h100/megakernel-v32/runs/lib.sh
BASE_NODE=.device/v32.node.xz
