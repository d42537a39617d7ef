#!/usr/bin/env bash
# Device run 82e (v33): what HF agrees with itself on over seeds 0-7 (the floor of the agreement bar): for each seed,
# side by side, HF bf16 eager's reference (hf_reference.py, as run 82d), then HF bf16 SDPA and HF float32 eager
# teacher-forced on its tokens (`--from`). The log also goes to $OUT/log-r82e.txt.
. "$(dirname "$0")/lib.sh"
run_setup r82e
self_agreement() {
  local s=$1
  hfref $s
  hf_ref /tmp/hf$s-sdpa hfsdpa-$s.txt --from /tmp/hf$s --attention sdpa; echo "sdpa seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hfsdpa-$s.txt) $(elapsed)"
  hf_ref /tmp/hf$s-f32 hff32-$s.txt --from /tmp/hf$s --dtype float32; echo "f32 seed $s rc=$? $(grep -o '"agreement": [0-9.]*' $R/hff32-$s.txt) $(elapsed)"
}
{
for s in 0 1 2 3 4 5 6 7; do self_agreement $s & done
wait
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r82e.txt
