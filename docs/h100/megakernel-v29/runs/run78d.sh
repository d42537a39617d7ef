#!/usr/bin/env bash
# Device run 78d (v29): weight_div without __fdiv_rn in its code (zero weights return +0 themselves: run 78c's build
# still sent them through __fdiv_rn's slow path). The probe; GPU tests; greedy ids; 3 alternating rounds at 1/128 of
# off, staged to 384 with HF's roundings, flash-style; stage traces of both at positions 140 and 260.
. "$(dirname "$0")/lib.sh"
run_setup r78d
(cd docs/h100/megakernel-v29/probes && nvcc -O3 -arch=sm_90a -o /tmp/div div.cu && /tmp/div) > $R/div.txt 2>&1; echo "div probe rc=$? $(elapsed)"; head -4 $R/div.txt
gpu_tests
pack
U=QK_MEGAKERNEL_STAGED_UNTIL=384
QK_MEGAKERNEL_STAGED_UNTIL=384 genw $B greedy-r384.json 256 --engine megakernel --temperature 0; echo "greedy r384 rc=$? $(ids $R/greedy-r384.json) (78a, __fdiv_rn: c3947782)"
rounds 3 1,128 256 "off $B X=1" "r384 $B $U" "r384f $B $U QK_MEGAKERNEL_STAGED_HF=0"
pack
for p in 140 260; do
  for v in "r384 $U" "r384f $U QK_MEGAKERNEL_STAGED_HF=0"; do
    read -r name e <<< "$v"
    env $e QK_MEGAKERNEL_TRACE=$R/trace-$name-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$name-p$p.log 2>&1; echo "trace $name $p rc=$? $(elapsed)"
  done
done
pack
echo "t=$(elapsed)"
