#!/usr/bin/env bash
# Device run 72e (v23): where the attention block's 1.3 µs of "attend" per layer go (run 72b's traces, one chunk per
# head). Nsight Compute source counters (as v17's run 66a) on one launch of main's greedy G = 2 kernel, decoding
# from a ~40-token prompt (one chunk per head, 5-6 warps with keys): stall reasons per source line and per SASS
# instruction.
. "$(dirname "$0")/lib.sh"
setup r72e
NCU=/usr/local/cuda/bin/ncu
P="The sea covers most of the planet, and its tides, currents and storms shape the coasts where people have lived, fished and traded for thousands of years."
QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 300 $NCU --replay-mode application -k regex:qwen3_decode -c 1 \
  --section SourceCounters --section WarpStateStats --import-source yes -o $R/src \
  $N $B generate --preset 0.6b --engine megakernel --max-tokens 8 --temperature 0 "$P" > $R/ncu.log 2>&1
echo "ncu rc=$? $(elapsed)"; tail -3 $R/ncu.log
timeout 120 $NCU --import $R/src.ncu-rep --page source --csv --print-source cuda > $R/cuda.csv 2> $R/cuda.err; echo "cuda page rc=$? $(wc -c < $R/cuda.csv) bytes"; head -c 300 $R/cuda.err
timeout 120 $NCU --import $R/src.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2> $R/sass.err; echo "sass page rc=$? $(wc -c < $R/sass.csv) bytes"; head -c 300 $R/sass.err
timeout 60 $NCU --import $R/src.ncu-rep --page details > $R/details.txt 2>&1
xz -T4 $R/sass.csv $R/cuda.csv; rm -f $R/src.ncu-rep
echo "t=$(elapsed)"
