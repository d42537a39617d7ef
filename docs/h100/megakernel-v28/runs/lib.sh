# Shared steps of the v28 device runs: v27's (docs/h100/megakernel-v27/runs/lib.sh and the libraries it sources).
# New: `staged_sanitizers`, synccheck and racecheck of a 4-token decode that takes the staged attention
# (QK_MEGAKERNEL_STAGED_FROM=1, so that the first positions already stage), on `sanitizers_with NAME ENV…`. Sourced
# by run77*.sh from the repository root.
. docs/h100/megakernel-v27/runs/lib.sh
# sanitizers_with NAME ENV…: synccheck and racecheck of a 4-token greedy decode of $B with ENV, into
# $R/synccheck-NAME.txt and $R/racecheck-NAME.txt.
sanitizers_with() {
  local n=$1 cs; shift
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  env "$@" QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck-$n.txt 2>&1; echo "synccheck $n rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck-$n.txt | head -3
  env "$@" QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck-$n.txt 2>&1; echo "racecheck $n rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-$n.txt | head -3
}
staged_sanitizers() { sanitizers_with staged QK_MEGAKERNEL_STAGED_UNTIL=256 QK_MEGAKERNEL_STAGED_FROM=1; }
