# Shared steps of the v30 device runs: v29's (docs/h100/megakernel-v29/runs/lib.sh and the libraries it sources).
# New: `smi_during NAME CMD…`, nvidia-smi's SM clock, power and memory clock every 50 ms while CMD runs; `sass`, the
# addon's SASS with line info (cuobjdump/nvdisasm of the device's toolkit); `floor`, HF's agreement with itself;
# `phase_traces`, stage traces with the phase diagnostics; `rework_check`, the checks of each step of the staged
# attention's rework; `ncu_source LIMIT`, Nsight Compute's source counters of the first megakernel launch of a greedy
# 0.6B decode from a ~256-token prompt (its steps take the staged attention at ~257-264 keys) into $R/sass.csv.xz
# (run 79c; v33's run 82b). Sourced by run79*.sh from the repository root.
. docs/h100/megakernel-v29/runs/lib.sh
ncu_source() {
  local NCU=/usr/local/cuda/bin/ncu P
  P=$(python3 -c "print(' '.join(['sea'] * 255))")
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout "$1" $NCU --replay-mode application -k regex:qwen3_decode -c 1 \
    --section SourceCounters --section WarpStateStats --import-source yes -o $R/src \
    $N $B generate --preset 0.6b --engine megakernel --max-tokens 8 --temperature 0 "$P" > $R/ncu.log 2>&1
  echo "ncu rc=$? $(elapsed)"; tail -3 $R/ncu.log
  timeout 120 $NCU --import $R/src.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2> $R/sass.err; echo "sass page rc=$? $(wc -c < $R/sass.csv) bytes"; head -c 300 $R/sass.err
  timeout 60 $NCU --import $R/src.ncu-rep --page details > $R/details.txt 2>&1
  xz -T4 $R/sass.csv; rm -f $R/src.ncu-rep
}
smi_during() {
  local n=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > "$R/smi-$n.csv" 2>&1 &
  local pid=$!
  "$@"
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  echo "smi $n: $(awk -F', ' '{print $2}' "$R/smi-$n.csv" | sort | uniq -c | sort -rn | head -4 | tr '\n' ' ')"
}
sass() {
  mkdir -p /tmp/sass && (cd /tmp/sass && cuobjdump -xelf all /tmp/b/bundle/qk_cuda.node > /dev/null 2>&1; ls) > "$R/sass-files.txt" 2>&1
  local f
  for f in /tmp/sass/*.cubin; do
    if nvdisasm -g -c "$f" 2>/dev/null | grep -q qwen3_decode_kernel; then
      nvdisasm -g -c "$f" 2>/dev/null | xz -T4 -6 > "$R/sass-megakernel.txt.xz"; echo "sass from $(basename $f): $(xz -dc $R/sass-megakernel.txt.xz | wc -l) lines"
      break
    fi
  done
}
# floor SEEDS: for each seed, HF bf16 eager's reference (hf_reference.py, 256 teacher-forced steps from a 32-token
# prompt), then HF bf16 sdpa and HF float32 eager teacher-forced on the same checkpoint and tokens (their printed
# agreement with eager: the spread between two HF runs of one checkpoint), and the megakernel compared with all three.
floor() {
  local P=/tmp/b/bundle/peers/hf_reference.py s v
  for s in "$@"; do
    hfref $s
    (cd /tmp && timeout 120 python3 $P /tmp/hf$s-sdpa --from /tmp/hf$s --attention sdpa > $R/hfsdpa-$s.txt 2>&1; echo "sdpa seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hfsdpa-$s.txt) $(elapsed)")
    (cd /tmp && timeout 120 python3 $P /tmp/hf$s-f32 --from /tmp/hf$s --dtype float32 > $R/hff32-$s.txt 2>&1; echo "f32 seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hff32-$s.txt) $(elapsed)")
    for v in "" -sdpa -f32; do compare_hf /tmp/hf$s$v seed$s$v; done
  done
}
# phase_traces DEBUG…: traces at 140 and 260 keys, HF's roundings (hf) and flash-style (f), once per
# QK_MEGAKERNEL_DEBUG value (stem NAME-pPOSITION-dDEBUG): runs 79a and 79b.
phase_traces() {
  local p v d w
  for p in 140 260; do
    for v in "hf X=1" "f QK_MEGAKERNEL_STAGED_HF=0"; do
      read -r -a w <<< "$v"
      for d in "$@"; do trace "${w[0]}-p$p-d$d" "$p" "${w[@]:1}" QK_MEGAKERNEL_DEBUG=$d; done
    done
  done
  xz -T4 $R/trace-*.json
  pack
}
# rework_check: the checks of each step of the staged attention's rework (runs 79e, 79g, 79k): GPU tests, v29's ids,
# 3 alternating rounds at 1/128 against off (the attention by chunks), traces at 140 and 260 keys.
rework_check() {
  gpu_tests
  genw $B greedy.json 256 --engine megakernel --temperature 0; echo "greedy rc=$? $(ids $R/greedy.json) (v29: c3947782)"
  genw $B greedy400.json 400 --engine megakernel --temperature 0; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v29: b924f925)"
  genw $B sampled.json 256 --engine megakernel --seed 1; echo "sampled rc=$? $(ids $R/sampled.json) (v29: 24aa5aaf)"
  QK_MEGAKERNEL_STAGED_HF=0 genw $B greedy-f.json 256 --engine megakernel --temperature 0; echo "greedy flash-style rc=$? $(ids $R/greedy-f.json) (v28 77d flash-style to 256: a63b8c31; v29 to 384: not recorded)"
  pack
  rounds 3 1,128 256 "off $B QK_MEGAKERNEL_STAGED_UNTIL=0" "new $B X=1"
  pack
  traces "140 260" "new X=1"
}
