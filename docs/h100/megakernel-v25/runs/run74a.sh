#!/usr/bin/env bash
# Device run 74a (v25): the LM head screened in int8 (branch lm-screen: bundle-scr + cand/scr.node) against main
# (455e745's kernels, cand/main.node). GPU tests of the screened build; greedy ids screened and unscreened
# (QK_MEGAKERNEL_SCREEN=0) against main's aa30529c; 400 greedy and sampled; 1.7B greedy ids of both builds; synccheck
# and racecheck of the screened build; one A/B round at 1/128/512/1024.
. "$(dirname "$0")/lib.sh"
setup r74a
setup_scr
gpu_tests_scr
genw $S greedy-scr.json 256 --engine megakernel --temperature 0; echo "greedy scr rc=$? $(ids $R/greedy-scr.json) (main: aa30529c)"
(export QK_MEGAKERNEL_SCREEN=0; genw $S greedy-scr0.json 256 --engine megakernel --temperature 0; echo "greedy scr0 rc=$? $(ids $R/greedy-scr0.json) (main: aa30529c)")
ids_400_sampled scr $S
gen_ids 1.7b main $B; gen_ids 1.7b scr $S
sanitizers_in $S scr
rounds 1 1,128,512,1024 256 "main $B X=1" "scr $S X=1"
echo "t=$(elapsed)"
