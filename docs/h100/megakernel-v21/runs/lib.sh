# Shared steps of the v21 device runs: v20's (docs/h100/megakernel-v20/runs/lib.sh), with v20's addon as the baseline
# (BASE_NODE, built here from 804f1f8's sources without PTX), and `rounds`. Sourced by run70*.sh from the repository
# root.
BASE_NODE=.device/v20.node.xz
. docs/h100/megakernel-v20/runs/lib.sh
# rounds N POSITIONS TOKENS VARIANT…: N rounds of `ab`, each running the variants in turn. A variant is one word list,
# "NAME BUNDLE ENV…" (BUNDLE: $O, v20's addon, or $B, the candidate; X=1 where no knob is set).
rounds() {
  local n=$1 p=$2 t=$3 v w
  shift 3
  for i in $(seq 1 "$n"); do
    for v in "$@"; do
      read -r -a w <<< "$v"
      ab "${w[0]}" "$p" "$t" "${w[1]}" "${w[@]:2}"
    done
  done
}
