# Shared steps of the v25 device runs: v24's (runs/lib.sh: `setup NAME` puts main's bundle and addon in $B, and the
# steps of v20-v24). New: `setup_scr [NAME]` unpacks .device/bundle-scr.tar.xz (the bundle of the screened LM head,
# without its addon) with cand/NAME.node (default scr) into /tmp/s and sets $S to its qk.mjs; `gpu_tests_scr`, the GPU tests of that bundle
# (.device/gputest/megakernel-test-scr.mjs). Sourced by run74*.sh from the repository root.
. docs/h100/megakernel-v24/runs/lib.sh
setup_scr() {
  rm -rf /tmp/s && mkdir -p /tmp/s && tar -xJf .device/bundle-scr.tar.xz -C /tmp/s &&
    cp "/tmp/cand/cand/${1:-scr}.node" /tmp/s/bundle/qk_cuda.node
  S=/tmp/s/bundle/qk.mjs
  cat /tmp/s/bundle/build-info.json > "$R/build-info-scr.json"
}
gpu_tests_scr() {
  cp .device/gputest/megakernel-test-scr.mjs /tmp/s/bundle/
  (cd /tmp/s/bundle && timeout 300 $N megakernel-test-scr.mjs > "$R/megakernel-test-scr.txt" 2>&1; echo "megakernel tests scr rc=$? $(elapsed)"; grep -E "FAIL|passed|failed|✓|×" "$R/megakernel-test-scr.txt" | head -30)
}
# sanitizers_in BUNDLE NAME: synccheck and racecheck of BUNDLE on a 4-token greedy decode (v20's commands).
sanitizers_in() {
  local x=$1 n=$2 cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 120 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $x generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck-$n.txt 2>&1; echo "synccheck $n rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck-$n.txt | head -3
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 170 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $x generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck-$n.txt 2>&1; echo "racecheck $n rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck-$n.txt | head -3
}
