# Shared steps of the v33 device runs: v32's (docs/h100/megakernel-v32/runs/lib.sh and the libraries it sources),
# with v32's landed addon as the baseline bundle $O (`run_setup NAME baseline`, from .device/v32.node.xz).
# Sourced by run82*.sh from the repository root.
. docs/h100/megakernel-v32/runs/lib.sh
BASE_NODE=.device/v32.node.xz
# sweep8b POSITIONS: a Qwen3-8B checkpoint with random weights (model init) at /tmp/ref8, then its sweep at POSITIONS
# with the layered engine and HF static cache + CUDA graph, 256 tokens, median of 3 (runs 83a, 83d; 83d ran it with
# its sweep bounded at 300 s, before this step was shared).
sweep8b() {
  timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
  timeout 420 $N $B bench decode --model /tmp/ref8 --engines layered,megakernel --hf-peers graph --positions "$1" --tokens 256 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "sweep 8b rc=$? $(elapsed)"
  grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode8b.md | head -14
}
