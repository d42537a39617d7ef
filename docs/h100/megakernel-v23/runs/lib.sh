# Shared steps of the v23 device runs: v22's (runs/lib.sh: v21's and v20's steps, `candidates`, `candidate_node`,
# `gpu_tests_in`, `genw`, `sanitizers`). New: the bundle travels without its addon, and main's addon is one of the
# candidates (cand/main.node), so that all addons compress together in one archive: `setup NAME` runs run_setup, unpacks
# .device/cand.tar.xz and puts main's addon into the bundle ($B). Sourced by run72*.sh from the repository root.
. docs/h100/megakernel-v22/runs/lib.sh
setup() {
  run_setup "$1"
  candidates .device/cand.tar.xz
  cp /tmp/cand/cand/main.node /tmp/b/bundle/qk_cuda.node
  ls /tmp/cand/cand > "$R/candidates.txt"
}
