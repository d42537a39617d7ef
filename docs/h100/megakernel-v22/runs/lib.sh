# Shared steps of the v22 device runs: v21's (runs/lib.sh: v20's steps, v20's addon as the baseline O, `rounds`), and
# candidate addons beside them: `candidate NAME FILE` makes a copy of the bundle with the addon FILE (.xz) and sets
# $NAME to its qk.mjs. Sourced by run71*.sh from the repository root.
. docs/h100/megakernel-v21/runs/lib.sh
candidate() {
  local name=$1 file=$2
  rm -rf "/tmp/c-$name" && mkdir -p "/tmp/c-$name" && cp -r /tmp/b/bundle "/tmp/c-$name/bundle" &&
    xz -dc "$file" > "/tmp/c-$name/bundle/qk_cuda.node"
  printf -v "$name" '%s' "/tmp/c-$name/bundle/qk.mjs"
}
# candidates FILE: unpacks FILE (a .tar.xz of cand/NAME.node addons) to /tmp/cand; then `candidate_node NAME` makes a
# copy of the bundle with /tmp/cand/cand/NAME.node and sets $NAME (upper case) to its qk.mjs.
candidates() { rm -rf /tmp/cand && mkdir -p /tmp/cand && tar -xJf "$1" -C /tmp/cand; }
candidate_node() {
  local name=$1 var=${1^^}
  rm -rf "/tmp/c-$var" && mkdir -p "/tmp/c-$var" && cp -r /tmp/b/bundle "/tmp/c-$var/bundle" &&
    cp "/tmp/cand/cand/$name.node" "/tmp/c-$var/bundle/qk_cuda.node"
  printf -v "$var" '%s' "/tmp/c-$var/bundle/qk.mjs"
}
# gpu_tests_in NAME: the megakernel GPU tests against the candidate NAME's addon.
gpu_tests_in() {
  local dir=/tmp/c-$1/bundle
  cp .device/gputest/megakernel-test.mjs "$dir/"
  (cd "$dir" && timeout 200 $N megakernel-test.mjs > "$R/megakernel-test-$1.txt" 2>&1; echo "megakernel tests $1 rc=$? $(elapsed)"; grep -E "FAIL|passed|failed" -A3 "$R/megakernel-test-$1.txt" | head -16)
}
# genw BUNDLE FILE TOKENS ARGS…: `gen` with another bundle.
genw() {
  local x=$1 f=$2 t=$3; shift 3
  timeout 60 $N $x generate --preset 0.6b "$@" --max-tokens $t --json "Tell me about the sea" > "$R/$f" 2>/dev/null
}
# sanitizers: synccheck and racecheck of the candidate bundle ($B) on a 4-token decode (as v20's run 69f ran them).
sanitizers() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 100 $cs --tool synccheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/synccheck.txt 2>&1; echo "synccheck rc=$? $(elapsed)"; grep -E "ERROR SUMMARY" $R/synccheck.txt | head -3
  QK_MEGAKERNEL_TIMEOUT_MS=600000 timeout 150 $cs --tool racecheck --kernel-name kns=qwen3_decode $N $B generate --preset 0.6b --engine megakernel --max-tokens 4 --temperature 0 "hello" > $R/racecheck.txt 2>&1; echo "racecheck rc=$? $(elapsed)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt | head -3
}
# ids_400_sampled NAME BUNDLE: 400 greedy tokens and 256 sampled ones (seed 1) from candidate NAME's bundle, with the
# reference ids (v12-v23: d7460a19; v10-v23: dc211a68) beside them.
ids_400_sampled() {
  local n=$1 x=$2
  genw $x greedy400-$n.json 400 --engine megakernel --temperature 0; echo "greedy 400 $n rc=$? $(ids $R/greedy400-$n.json) (reference: d7460a19)"
  genw $x sampled-$n.json 256 --engine megakernel --seed 1; echo "sampled $n rc=$? $(ids $R/sampled-$n.json) (reference: dc211a68)"
}
