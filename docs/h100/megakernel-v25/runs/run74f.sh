#!/usr/bin/env bash
# Device run 74f (v25): the 0.6B and 8B sweeps (v20's `sweeps`: HF static cache + CUDA graph and the layered engine in
# the same run) of the build that lands (scr2, as run 74e).
. "$(dirname "$0")/lib.sh"
setup r74f
setup_scr scr2
B=$S
sweeps
echo "t=$(elapsed)"
