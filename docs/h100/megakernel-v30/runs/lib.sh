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
