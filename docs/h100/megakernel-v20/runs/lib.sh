# Shared steps of the v20 device runs (sourced by run69*.sh, which run from the repository root with .device carried).
# run_setup NAME [baseline]: unpacks node and the candidate bundle (B); with `baseline`, also a copy of the bundle with
# v19's addon (O; BASE_NODE names another). Results go to /tmp/NAME (R), which is packed into $OUT/NAME.tgz on exit.
set -u
START=$(date +%s)
run_setup() {
  local name=$1 base=${2:-}
  xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
  rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
  if [ "$base" = baseline ]; then
    mkdir -p /tmp/o && cp -r /tmp/b/bundle /tmp/o/bundle && xz -dc "${BASE_NODE:-.device/v19.node.xz}" > /tmp/o/bundle/qk_cuda.node
  fi
  N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/$name; rm -rf "$R"; mkdir -p "$R"
  trap "tar -czf \$OUT/$name.tgz -C /tmp $name" EXIT
  cat /tmp/b/bundle/build-info.json > "$R/build-info.json"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$R/gpu.txt" 2>&1
}
elapsed() { echo "$(( $(date +%s) - START ))s"; }
# md5 (8 hex digits) of the generated ids in a `generate --json` output.
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
# The megakernel GPU tests (bundled by tooling/scripts/gpu-test-bundle.mjs) against the candidate's addon.
gpu_tests() {
  cp .device/gputest/megakernel-test.mjs /tmp/b/bundle/
  (cd /tmp/b/bundle && timeout 200 $N megakernel-test.mjs > "$R/megakernel-test.txt" 2>&1; echo "megakernel tests rc=$? $(elapsed)"; grep -E "FAIL|passed|failed" -A3 "$R/megakernel-test.txt" | head -16)
}
# gen FILE TOKENS ARGS…: a 0.6B-preset generation of TOKENS tokens from the fixed prompt into $R/FILE.
gen() {
  local f=$1 t=$2; shift 2
  timeout 60 $N $B generate --preset 0.6b "$@" --max-tokens $t --json "Tell me about the sea" > "$R/$f" 2>/dev/null
}
# v19's reference ids: 256 sampled tokens and 400 greedy ones; then 10 greedy repeats of 256.
reference_ids() {
  gen sampled.json 256 --engine megakernel --seed 1; echo "sampled rc=$? $(ids $R/sampled.json) (v10-v19: dc211a68)"
  gen greedy400.json 400 --engine megakernel --temperature 0; echo "greedy 400 rc=$? $(ids $R/greedy400.json) (v12-v19: d7460a19)"
}
repeat_ids() {
  for k in 1 2 3 4 5 6 7 8 9 10; do gen repeat-$k.json 256 --engine megakernel --temperature 0; echo "repeat rc=$? $(ids $R/repeat-$k.json)"; done | tee "$R/repeats.txt" | sort | uniq -c
}
# ab NAME POSITIONS TOKENS BUNDLE ENV…: one 0.6B bench of the megakernel alone (round $i), its µs per position printed.
ab() {
  local v=$1 P=$2 T=$3 X=$4; shift 4
  env "$@" timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions $P --tokens $T --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(elapsed)"
}
# ab8 NAME BUNDLE ENV…: the 8B preset at positions 1 and 1024, 64 tokens.
ab8() {
  local v=$1 X=$2; shift 2
  env "$@" timeout 150 $N $X bench decode --preset 8b --engines megakernel --positions 1,1024 --tokens 64 --runs 3 --no-peers --no-layered --markdown $R/ab8-$v.md > $R/ab8-$v.log 2>&1
  echo "8b $v rc=$? $(grep -E '^\| megakernel position' $R/ab8-$v.md | awk -F'|' '{printf "%s=%s ", $2, $3}' | sed 's/megakernel position //g') $(elapsed)"
}
# knob_run PREFIX ENV LABEL "IDS" "SWEEP" "WINDOWS": greedy ids at the values IDS; 3 rounds of v19 and the knob at the
# values SWEEP (positions 1/128/512/1024, 256 tokens); 2 rounds of 32-token windows at the values WINDOWS.
knob_run() {
  local p=$1 k=$2 label=$3 idv=$4 sweep=$5 win=$6 s
  for s in $idv; do eval "$k=$s gen greedy-$p$s.json 256 --engine megakernel --temperature 0"; echo "greedy $label $s rc=$? $(ids $R/greedy-$p$s.json) (v9-v19: aa30529c)"; done
  for i in 1 2 3; do
    ab v19 1,128,512,1024 256 $O X=1
    for s in $sweep; do ab $p$s 1,128,512,1024 256 $B $k=$s; done
  done
  for i in 1 2; do for s in $win; do ab w-$p$s 8,64,120 32 $B $k=$s; done; done
}
# The 0.6B sweep (layered and megakernel, HF static + CUDA graph, positions 1-4096, 256 tokens) and the 8B sweep
# (megakernel, HF static + CUDA graph, positions 1-2048, 128 tokens), each on a `qk model init` checkpoint.
sweeps() {
  timeout 200 $N $B model init --preset 0.6b --out /tmp/ref06 --force > $R/init06.txt 2>&1; echo "init 0.6b rc=$? $(elapsed)"
  timeout 300 $N $B bench decode --model /tmp/ref06 --engines layered,megakernel --hf-peers graph --positions 1,128,512,1024,4096 --tokens 256 --runs 3 --markdown $R/decode06.md --report $R/report06 > $R/decode06.log 2>&1; echo "sweep 0.6b rc=$? $(elapsed)"
  grep -E "^\| (layered|megakernel)|^Copy ceiling" $R/decode06.md | head -14
  rm -rf /tmp/ref06
  timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
  timeout 300 $N $B bench decode --model /tmp/ref8 --engines megakernel --no-layered --hf-peers graph --positions 1,128,1024,2048 --tokens 128 --runs 3 --markdown $R/decode8b.md --report $R/report8 > $R/decode8b.log 2>&1; echo "8b rc=$? $(elapsed)"
  grep -E "^\| megakernel|^Copy ceiling" $R/decode8b.md | head -6
}
