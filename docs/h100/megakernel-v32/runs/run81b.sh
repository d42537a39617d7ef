#!/usr/bin/env bash
# Device run 81b (v32): the placement search. The bundle's addon is a QK_MEGAKERNEL_PAD_SEARCH=1 build (90a only):
# QK_MEGAKERNEL_PAD=N runs the greedy screened kernels of one path with N instructions of padding after the attention
# (the staged kernel runs the 128 row, the chunked one the 512 and 1024 rows). 2 rounds over the 17 paddings, main
# (v29's kernels) and the build's default paddings (staged 0, chunked 736) in each; then a third round of the five
# best staged paddings at 128 and the five best chunked ones at 1024, with main and the defaults.
. "$(dirname "$0")/lib.sh"
run_setup r81b baseline
PADS="0 128 256 384 512 640 736 768 896 1024 1152 1280 1408 1536 1664 1792 1920"
for i in 1 2; do
  ab main 128,512,1024 256 $O X=1
  ab def 128,512,1024 256 $B X=1
  for p in $PADS; do ab pad$p 128,512,1024 256 $B QK_MEGAKERNEL_PAD=$p; done
done
pack
best() {  # best POSITION: the five paddings with the lowest mean of rounds 1-2 at POSITION
  for p in $PADS; do
    awk -F'|' -v P="megakernel position $1 " -v n=$p '$2 ~ P {s += $3; k++} END {if (k) printf "%s %.1f\n", n, s / k}' $R/ab-pad$p-1.md $R/ab-pad$p-2.md
  done | sort -k2 -n | head -5
}
echo "best at 128: $(best 128 | tr '\n' ' ')"
echo "best at 1024: $(best 1024 | tr '\n' ' ')"
i=3
ab main 128,1024 256 $O X=1
ab def 128,1024 256 $B X=1
for p in $( (best 128; best 1024) | awk '{print $1}' | sort -un); do ab pad$p 128,1024 256 $B QK_MEGAKERNEL_PAD=$p; done
ab main 128,1024 256 $O X=1
pack
echo "t=$(elapsed)"
