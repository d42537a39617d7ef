# Shared steps of the v21 device runs: v20's (docs/h100/megakernel-v20/runs/lib.sh), with v20's addon as the baseline
# (BASE_NODE, built here from 804f1f8's sources without PTX). Sourced by run70*.sh from the repository root.
BASE_NODE=.device/v20.node.xz
. docs/h100/megakernel-v20/runs/lib.sh
