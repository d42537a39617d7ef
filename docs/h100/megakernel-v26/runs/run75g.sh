#!/usr/bin/env bash
# Device run 75g (v26): `sel`, a sampled step's last block selecting the step's k best keys (draw_select) instead of
# merging the 132 blocks' lists one by one (QK_MEGAKERNEL_DEBUG=128 keeps the merge, in the same addon). GPU tests;
# sampled ids (main's references) and 1.7B sampled ids; sampled decode by `qk bench decode --seed 0`, select against
# merge, 2 alternating rounds at 1/128/1024; synccheck and racecheck of a sampled decode.
. "$(dirname "$0")/lib.sh"
run_setup r75g
gpu_tests
pack
ids_400_sampled sel $B
QK_MEGAKERNEL_SCREEN=1 timeout 200 $N $B generate --preset 1.7b --engine megakernel --max-tokens 64 --json --seed 3 "Tell me about the sea" > "$R/sampled-1.7b.json" 2>"$R/sampled-1.7b.err"
echo "sampled 1.7b rc=$? $(ids $R/sampled-1.7b.json) (75c/75e: 880c8b49) $(elapsed)"
pack
for i in 1 2; do
  for v in "select X=1" "merge QK_MEGAKERNEL_DEBUG=128"; do
    set -- $v
    env "$2" timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions 1,128,1024 --tokens 256 --runs 3 --no-peers --no-layered --seed 0 --markdown $R/ab-$1-$i.md > $R/ab-$1-$i.log 2>&1
    echo "$1 $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$1-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(elapsed)"
  done
done
pack
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 60 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --seed 1 "hello" > $R/synccheck-sampled.txt 2>&1; echo "synccheck sampled rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck-sampled.txt | head -3
pack
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --seed 1 "hello" > $R/racecheck-sampled.txt 2>&1; echo "racecheck sampled rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-sampled.txt | head -3
pack
echo "t=$(elapsed)"
