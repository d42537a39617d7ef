# Shared steps of the v30 device runs: v29's (docs/h100/megakernel-v29/runs/lib.sh and the libraries it sources).
# New: `smi_during NAME CMD…`, nvidia-smi's SM clock, power and memory clock every 50 ms while CMD runs; `sass`, the
# addon's SASS with line info (cuobjdump/nvdisasm of the device's toolkit). Sourced by run79*.sh from the repository root.
. docs/h100/megakernel-v29/runs/lib.sh
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
    (cd /tmp && timeout 150 python3 $P /tmp/hf$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref-$s.txt 2>&1; echo "hfref seed $s rc=$? $(elapsed)")
    (cd /tmp && timeout 120 python3 $P /tmp/hf$s-sdpa --from /tmp/hf$s --attention sdpa > $R/hfsdpa-$s.txt 2>&1; echo "sdpa seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hfsdpa-$s.txt) $(elapsed)")
    (cd /tmp && timeout 120 python3 $P /tmp/hf$s-f32 --from /tmp/hf$s --dtype float32 > $R/hff32-$s.txt 2>&1; echo "f32 seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hff32-$s.txt) $(elapsed)")
    for v in "" -sdpa -f32; do
      timeout 90 $N $B model compare /tmp/hf$s$v --engine megakernel --json $R/cmp-seed$s$v.json > $R/cmp-seed$s$v.md 2>&1; echo "compare seed $s$v rc=$? $(tail -1 $R/cmp-seed$s$v.md) $(elapsed)"
    done
  done
}
