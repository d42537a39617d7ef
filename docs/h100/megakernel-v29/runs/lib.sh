# Shared steps of the v29 device runs: v28's (docs/h100/megakernel-v28/runs/lib.sh and the libraries it sources).
# New: `ring_sanitizers`, synccheck and racecheck of a 4-token decode that takes the staged attention over the whole
# ring (QK_MEGAKERNEL_STAGED_UNTIL=384, FROM=1: from the first position); `trace`, `traces`, stage traces; `div_probe`;
# `land_check`, the checks of the build that lands. Sourced by run78*.sh from the repository root.
# (Runs 78a and 78e called it with an argument that the shell took for the command: both sanitizers exited 127.)
. docs/h100/megakernel-v28/runs/lib.sh
ring_sanitizers() { sanitizers_with ring QK_MEGAKERNEL_STAGED_UNTIL=384 QK_MEGAKERNEL_STAGED_FROM=1; }
# div_probe: probes/div.cu (weight_div against __fdiv_rn, bit for bit) built and run into $R/div.txt.
div_probe() {
  (cd docs/h100/megakernel-v29/probes && nvcc -O3 -arch=sm_90a -o /tmp/div div.cu && /tmp/div) > $R/div.txt 2>&1; echo "div probe rc=$? $(elapsed)"; head -4 $R/div.txt
}
# trace STEM POSITION ENV…: a stage trace of $B (one step per launch, 32 tokens from POSITION) into
# $R/trace-STEM.json, its log beside it. (TRACE_BUNDLE=$O: of that bundle instead; v31's run 80c.)
trace() {
  local s=$1 p=$2; shift 2
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$s.json timeout 100 $N "${TRACE_BUNDLE:-$B}" bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$s.log 2>&1; echo "trace $s rc=$? $(elapsed)"
}
# traces POSITIONS VARIANT…: `trace` of each variant ("NAME ENV…") at each position (stem NAME-pPOSITION), then the
# traces compressed and packed.
traces() {
  local ps=$1 v p w; shift
  for v in "$@"; do
    read -r -a w <<< "$v"
    for p in $ps; do trace "${w[0]}-p$p" "$p" "${w[@]:1}"; done
  done
  xz -T4 $R/trace-*.json
  pack
}
# land_check: the checks of the build that lands (runs 78g, 78h): GPU tests; greedy 256 and 400 tokens, sampled 256
# (seed 1), 1.7B greedy 32; `ring_sanitizers`; the 0.6B sweep.
land_check() {
  gpu_tests
  pack
  genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (78a-d, staged to 384: c3947782; v26-v28 main: aa30529c)"
  ids_400_sampled land $B
  gen_ids 1.7b land $B; echo "(v25-v28: e2ce96aa)"
  pack
  ring_sanitizers
  pack
  sweep06 1,128,512,1024,4096
  pack
}
