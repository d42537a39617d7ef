#!/usr/bin/env bash
# Device run 74h (v25): scr3 = the landed build without the screen's L2 requests for rows that may become candidates
# (about 80 rows per block, marked evict_last). One call, its results packed into $OUT after each part: greedy ids;
# A/B of scr2 unscreened, scr2 and scr3, 3 rounds at 1/128/512/1024 and 2 rounds of windows at 8/64/120; then, for
# scr3, the GPU tests, synccheck and racecheck, the 0.6B sweep, 10 greedy repeats, 400 greedy and sampled.
. "$(dirname "$0")/lib.sh"
run_setup r74h
candidates .device/cand.tar.xz
setup_scr scr2
S2=$S
rm -rf /tmp/s3 && cp -r /tmp/s /tmp/s3 && cp /tmp/cand/cand/scr3.node /tmp/s3/bundle/qk_cuda.node
S3=/tmp/s3/bundle/qk.mjs
pack() { tar -czf "$OUT/r74h.tgz" -C /tmp r74h; }
genw $S3 greedy-scr3.json 256 --engine megakernel --temperature 0; echo "greedy scr3 rc=$? $(ids $R/greedy-scr3.json) (main: aa30529c)"
rounds 3 1,128,512,1024 256 "scr20 $S2 QK_MEGAKERNEL_SCREEN=0" "scr2 $S2 X=1" "scr3 $S3 X=1"
rounds 2 8,64,120 32 "w-scr20 $S2 QK_MEGAKERNEL_SCREEN=0" "w-scr2 $S2 X=1" "w-scr3 $S3 X=1"
pack
cp .device/gputest/megakernel-test-scr.mjs /tmp/s3/bundle/
(cd /tmp/s3/bundle && timeout 200 $N megakernel-test-scr.mjs > "$R/megakernel-test-scr3.txt" 2>&1; echo "megakernel tests scr3 rc=$? $(elapsed)"; grep -E "passed|failed|FAIL" "$R/megakernel-test-scr3.txt" | tail -3)
sanitizers_in $S3 scr3
pack
B=$S3
timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
grep -E "^\| megakernel|^Copy ceiling" $R/decode06.md | head -7
pack
repeat_ids
ids_400_sampled scr3 $S3
pack
echo "t=$(elapsed)"
