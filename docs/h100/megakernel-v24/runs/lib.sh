# Shared steps of the v24 device runs: v23's (runs/lib.sh: `setup NAME` unpacks the bundle without its addon and
# .device/cand.tar.xz, whose cand/main.node goes into the bundle as $B; v22's `candidate_node`, `gpu_tests_in`,
# `genw`, `ids_400_sampled`; v21's `rounds`; v20's `ab`, `ab8`, `sweeps`, `sanitizers`). New: `gen_ids PRESET NAME
# BUNDLE`, 32 greedy tokens of another preset; `trace20 NAME BUNDLE ENV…`, a stage trace from position 20. Sourced by
# run73*.sh from the repository root.
. docs/h100/megakernel-v23/runs/lib.sh
gen_ids() {
  local p=$1 n=$2 x=$3
  timeout 200 $N $x generate --preset "$p" --engine megakernel --temperature 0 --max-tokens 32 --json "Tell me about the sea" > "$R/greedy-$p-$n.json" 2>"$R/greedy-$p-$n.err"
  echo "greedy $p $n rc=$? $(ids $R/greedy-$p-$n.json) $(elapsed)"
}
# trace20 NAME BUNDLE ENV…: a stage trace (one step per launch, 32 tokens) from position 20 into $R/trace-NAME-p20.json.
trace20() {
  local v=$1 x=$2; shift 2
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$v-p20.json timeout 100 $N $x bench decode --preset 0.6b --engines megakernel --positions 20 --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p20.log 2>&1; echo "trace $v rc=$? $(elapsed)"
}
