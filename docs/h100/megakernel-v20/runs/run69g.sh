#!/usr/bin/env bash
# Device run 69g (v20 final, aed9a85: sync and flagged words at GPU scope; its kernels' .text is byte-identical to run
# 69f's build): the 0.6B sweep with HF static + CUDA graph in the same run; the 8B sweep with HF static + CUDA graph;
# then two more A/B rounds against v19 (v19's addon, built from 1581699), numbered 4 and 5 after run 69f's three.
. "$(dirname "$0")/lib.sh"
run_setup r69g baseline
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
rm -rf /tmp/ref06
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
for i in 4 5; do ab v19 1,128,512,1024 256 $O X=1; ab gpu 1,128,512,1024 256 $B X=1; done
echo "t=$(elapsed)"
