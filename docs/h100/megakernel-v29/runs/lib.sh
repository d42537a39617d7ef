# Shared steps of the v29 device runs: v28's (docs/h100/megakernel-v28/runs/lib.sh and the libraries it sources).
# New: `ring_sanitizers`, synccheck and racecheck of a 4-token decode that takes the staged attention over the whole
# ring (QK_MEGAKERNEL_STAGED_UNTIL=384, FROM=1: from the first position). Sourced by run78*.sh from the repository root.
# (Runs 78a and 78e called it with an argument that the shell took for the command: both sanitizers exited 127.)
. docs/h100/megakernel-v28/runs/lib.sh
ring_sanitizers() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1 QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck-ring.txt 2>&1; echo "synccheck ring rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck-ring.txt | head -3
  QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1 QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck-ring.txt 2>&1; echo "racecheck ring rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-ring.txt | head -3
}
