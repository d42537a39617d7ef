#!/usr/bin/env bash
# Device run 83g (v33): the megakernel past the old hand-offs, checked. Qwen3-4B shapes (query groups of 4, whose
# hand-off moved from 1,152 to 8,448) against HF transformers: a 6,000-token prompt, 32 teacher-forced steps (HF bf16
# eager reference), the megakernel engine (every step in the megakernel now) and the layered engine.
# The log also goes to $OUT/log-r83g.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83g
{
hf_ref /tmp/hf4 hfref-4b.txt --preset 4b --dtype bfloat16 --prompt-len 6000 --steps 32 --seed 0; echo "hfref 4b rc=$? $(elapsed)"
for e in megakernel layered; do compare_engine /tmp/hf4 4b-$e $e; done
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83g.txt
