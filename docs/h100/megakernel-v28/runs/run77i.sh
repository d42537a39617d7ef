#!/usr/bin/env bash
# Device run 77i (v28): the GPU tests again after the O-merge and staged tests came to share knobAgainstDefault (the
# same assertions; the addon of run 77h).
. "$(dirname "$0")/lib.sh"
run_setup r77i
gpu_tests
pack
echo "t=$(elapsed)"
