# Shared steps of the v27 device runs: v26's (docs/h100/megakernel-v26/runs/lib.sh and the libraries it sources).
# New: `gpu_tests_env NAME ENV…`, the megakernel GPU tests with an environment (every instance the tests create reads
# it); `agreement SEEDS…` (and its steps `hfref`, `compare_hf`, `agreement_of`; `hf_ref` and `compare_engine` under
# them, shared by later runs), the HF agreement of the megakernel
# ungrouped and grouped. Sourced by run76*.sh from the repository root.
. docs/h100/megakernel-v26/runs/lib.sh
gpu_tests_env() {
  local n=$1; shift
  cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
  (cd /tmp/b/bundle && env "$@" timeout 200 $N megakernel-test.mjs > "$R/megakernel-test-$n.txt" 2>&1; echo "megakernel tests $n rc=$? $(elapsed)"; grep -E "FAIL|passed|failed" -A3 "$R/megakernel-test-$n.txt" | head -16)
}
# agreement SEEDS: HF agreement of the megakernel, ungrouped (the default) and grouped (QK_MEGAKERNEL_UNGROUP=0), on
# the 0.6B checkpoints hf_reference.py writes for each seed (256 teacher-forced steps from a 32-token prompt, HF bf16
# eager), as v7's run 56a/56d.
# hfref SEED: HF bf16 eager's reference (hf_reference.py: the 0.6B checkpoint of SEED, 256 teacher-forced steps from
# a 32-token prompt) in /tmp/hfSEED.
hfref() {
  hf_ref /tmp/hf$1 hfref-$1.txt --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $1; echo "hfref seed $1 rc=$? $(elapsed)"
}
# hf_ref DIR LOG ARGS…: hf_reference.py writing DIR with ARGS (run from /tmp), its output in $R/LOG; its status.
hf_ref() {
  local d=$1 log=$2; shift 2
  (cd /tmp && timeout 150 python3 /tmp/b/bundle/peers/hf_reference.py "$d" "$@" > "$R/$log" 2>&1)
}
# compare_engine DIR NAME ENGINE ENV…: engine ENGINE of $B with ENV against the HF reference in DIR, into
# $R/cmp-NAME.md/json.
compare_engine() {
  local d=$1 n=$2 e=$3; shift 3
  env "$@" timeout 90 $N $B model compare $d --engine $e --json $R/cmp-$n.json > $R/cmp-$n.md 2>&1; echo "compare $n rc=$? $(tail -n 1 $R/cmp-$n.md) $(elapsed)"
}
# compare_hf DIR NAME ENV…: the megakernel of $B with ENV against the HF reference in DIR, into $R/cmp-NAME.md/json.
compare_hf() { compare_engine "$1" "$2" megakernel "${@:3}"; }
# agreement_of SEED VARIANT…: `hfref` of SEED, then `compare_hf` of each variant ("NAME ENV…") as cmp-seedSEED-NAME.
agreement_of() {
  local s=$1 v w; shift
  hfref $s
  for v in "$@"; do
    read -r -a w <<< "$v"
    compare_hf /tmp/hf$s "seed$s-${w[0]}" "${w[@]:1}"
  done
}
agreement() {
  local s
  for s in "$@"; do agreement_of $s "ug X=1" "grouped QK_MEGAKERNEL_UNGROUP=0"; done
}
