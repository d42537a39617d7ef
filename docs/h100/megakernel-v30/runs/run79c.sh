#!/usr/bin/env bash
# Device run 79c (v30): Nsight Compute source counters (as v23's run 72e) on the first megakernel launch of a greedy
# 0.6B decode from a ~256-token prompt: its steps take the staged attention at ~257-264 keys. Stall reasons per SASS
# instruction of the staged attention (blocks 0-7).
. "$(dirname "$0")/lib.sh"
run_setup r79c
NCU=/usr/local/cuda/bin/ncu
P=$(python3 -c "print(' '.join(['sea'] * 255))")
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 300 $NCU --replay-mode application -k regex:qwen3_decode -c 1 \
  --section SourceCounters --section WarpStateStats --import-source yes -o $R/src \
  $N $B generate --preset 0.6b --engine megakernel --max-tokens 8 --temperature 0 "$P" > $R/ncu.log 2>&1
echo "ncu rc=$? $(elapsed)"; tail -3 $R/ncu.log
timeout 120 $NCU --import $R/src.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2> $R/sass.err; echo "sass page rc=$? $(wc -c < $R/sass.csv) bytes"; head -c 300 $R/sass.err
timeout 60 $NCU --import $R/src.ncu-rep --page details > $R/details.txt 2>&1
xz -T4 $R/sass.csv; rm -f $R/src.ncu-rep
pack
echo "t=$(elapsed)"
