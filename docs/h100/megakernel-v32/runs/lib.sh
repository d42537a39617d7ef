# Shared steps of the v32 device runs: v31's (docs/h100/megakernel-v31/runs/lib.sh and the libraries it sources).
# New: `path_ids NAME BUNDLE ENV…`, v29's reference ids (greedy 256 and 400, sampled 256, 1.7B greedy 32) with ENV.
# Sourced by run81*.sh from the repository root.
. docs/h100/megakernel-v31/runs/lib.sh
path_ids() {
  local n=$1 x=$2; shift 2
  env "$@" timeout 60 $N $x generate --preset 0.6b --engine megakernel --temperature 0 --max-tokens 256 --json "Tell me about the sea" > "$R/greedy-$n.json" 2>/dev/null; echo "greedy $n rc=$? $(ids $R/greedy-$n.json) (v29: c3947782)"
  env "$@" timeout 60 $N $x generate --preset 0.6b --engine megakernel --temperature 0 --max-tokens 400 --json "Tell me about the sea" > "$R/greedy400-$n.json" 2>/dev/null; echo "greedy 400 $n rc=$? $(ids $R/greedy400-$n.json) (v29: b924f925)"
  env "$@" timeout 60 $N $x generate --preset 0.6b --engine megakernel --seed 1 --max-tokens 256 --json "Tell me about the sea" > "$R/sampled-$n.json" 2>/dev/null; echo "sampled $n rc=$? $(ids $R/sampled-$n.json) (v29: 24aa5aaf)"
}
