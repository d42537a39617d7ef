#!/usr/bin/env bash
# Device run 74e (v25): the build that lands (scr2: the screened LM head in its own argmax kernel; bundle-scr with
# cand/scr2.node). GPU tests; 10 greedy repeats (aa30529c), 400 greedy and sampled; synccheck and racecheck; stage
# traces of main and scr2 from positions 20 (one chunk per head) and 80 (two).
. "$(dirname "$0")/lib.sh"
setup r74e
setup_scr scr2
gpu_tests_scr
B_MAIN=$B; B=$S
repeat_ids
ids_400_sampled scr2 $S
sanitizers_in $S scr2
trace80() {
  local v=$1 x=$2; shift 2
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$v-p80.json timeout 100 $N $x bench decode --preset 0.6b --engines megakernel --positions 80 --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v-p80.log 2>&1; echo "trace80 $v rc=$? $(elapsed)"
}
trace20 main $B_MAIN X=1; trace20 scr2 $S X=1; trace80 main $B_MAIN X=1; trace80 scr2 $S X=1
xz -T4 $R/trace-*.json
echo "t=$(elapsed)"
