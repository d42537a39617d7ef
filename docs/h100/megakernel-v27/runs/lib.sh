# Shared steps of the v27 device runs: v26's (docs/h100/megakernel-v26/runs/lib.sh and the libraries it sources).
# New: `gpu_tests_env NAME ENV…`, the megakernel GPU tests with an environment (every instance the tests create reads
# it). Sourced by run76*.sh from the repository root.
. docs/h100/megakernel-v26/runs/lib.sh
gpu_tests_env() {
  local n=$1; shift
  cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
  (cd /tmp/b/bundle && env "$@" timeout 200 $N megakernel-test.mjs > "$R/megakernel-test-$n.txt" 2>&1; echo "megakernel tests $n rc=$? $(elapsed)"; grep -E "FAIL|passed|failed" -A3 "$R/megakernel-test-$n.txt" | head -16)
}
# agreement SEEDS: HF agreement of the megakernel, ungrouped (the default) and grouped (QK_MEGAKERNEL_UNGROUP=0), on
# the 0.6B checkpoints hf_reference.py writes for each seed (256 teacher-forced steps from a 32-token prompt, HF bf16
# eager), as v7's run 56a/56d.
agreement() {
  local P=/tmp/b/bundle/peers/hf_reference.py s
  for s in "$@"; do
    (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
    timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-ug.json > $R/cmp-seed$s-ug.md 2>&1; echo "compare seed $s ungrouped rc=$? $(tail -1 $R/cmp-seed$s-ug.md)"
    QK_MEGAKERNEL_UNGROUP=0 timeout 90 $N $B model compare /tmp/hf$s --engine megakernel --json $R/cmp-seed$s-grouped.json > $R/cmp-seed$s-grouped.md 2>&1; echo "compare seed $s grouped rc=$? $(tail -1 $R/cmp-seed$s-grouped.md)"
  done
}
