# Shared steps of the v24 device runs: v23's (runs/lib.sh: `setup NAME` unpacks the bundle without its addon and
# .device/cand.tar.xz, whose cand/main.node goes into the bundle as $B; v22's `candidate_node`, `gpu_tests_in`,
# `genw`, `ids_400_sampled`; v21's `rounds`; v20's `ab`, `ab8`, `sweeps`, `sanitizers`). New: `gen_ids PRESET NAME
# BUNDLE`, 32 greedy tokens of another preset. Sourced by run73*.sh from the repository root.
. docs/h100/megakernel-v23/runs/lib.sh
gen_ids() {
  local p=$1 n=$2 x=$3
  timeout 200 $N $x generate --preset "$p" --engine megakernel --temperature 0 --max-tokens 32 --json "Tell me about the sea" > "$R/greedy-$p-$n.json" 2>"$R/greedy-$p-$n.err"
  echo "greedy $p $n rc=$? $(ids $R/greedy-$p-$n.json) $(elapsed)"
}
