#!/usr/bin/env bash
# Device run 83h (v33): where run 83g's disagreement comes from (4B, a 6,000-token prompt: the megakernel and the
# layered engine agree with each other on all 32 steps and with HF bf16 eager on 1). The shape or the context:
# 4B with a 32-token prompt, then 0.6B with a 6,000-token prompt, each against HF bf16 eager (layered engine), and
# 0.6B's HF float32 run over the same weights and tokens (its agreement with HF bf16; the layered engine against it).
# The log also goes to $OUT/log-r83h.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83h
ref() {  # NAME PRESET PROMPT-LEN
  hf_ref /tmp/hf-$1 hfref-$1.txt --preset $2 --dtype bfloat16 --prompt-len $3 --steps 32 --seed 0; echo "hfref $1 rc=$? $(elapsed)"
}
cmp() { compare_engine /tmp/hf-$1 $1-$2 $2; }  # NAME ENGINE
{
ref 4b-p32 4b 32; cmp 4b-p32 layered; rm -rf /tmp/hf-4b-p32
ref 06-p6000 0.6b 6000; cmp 06-p6000 layered; cmp 06-p6000 megakernel
hf_ref /tmp/hf-06-p6000-f32 hfref-06-p6000-f32.txt --from /tmp/hf-06-p6000 --dtype float32; echo "hf f32 rc=$? $(tail -n 2 $R/hfref-06-p6000-f32.txt | tr '\n' ' ') $(elapsed)"
cmp 06-p6000-f32 layered
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83h.txt
