# Shared steps of the v26 device runs: v25's (runs/lib.sh, which sources v20-v24's). `run_setup NAME` unpacks
# .device/bundle.tar.xz, the bundle of main with its addon, as $B. New: `pack`, the results so far into $OUT (a call
# that runs past its limit still returns them); `sweep06 POSITIONS`, the 0.6B sweep of $B (v20's `sweeps`, first half).
# Sourced by run75*.sh from the repository root.
. docs/h100/megakernel-v25/runs/lib.sh
pack() { tar -czf "$OUT/$(basename "$R").tgz" -C /tmp "$(basename "$R")"; }
sweep06() {
  timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
  timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions "$1" --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
  grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
}
