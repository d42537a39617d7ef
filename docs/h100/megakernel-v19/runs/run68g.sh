#!/usr/bin/env bash
# Device run 68g (v19 candidate): HF agreement on four checkpoints (seeds 0-3, 32-token prompts, 256 teacher-forced
# steps: positions 32-287, so 1-6 chunks per head), the megakernel with heads of 2-3 chunks merged by the O blocks
# (the default) and by chunk 0 (QK_MEGAKERNEL_O_MERGE=0, v19's bits), and the layered engine.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; R=/tmp/r68g; rm -rf $R; mkdir -p $R
P=/tmp/b/bundle/peers/hf_reference.py
trap 'tar -czf $OUT/r68g.tgz -C /tmp r68g' EXIT
cat /tmp/b/bundle/build-info.json > $R/build-info.json
for s in 0 1 2 3; do
  (cd /tmp && timeout 150 python3 $P /tmp/ref$s --preset 0.6b --dtype bfloat16 --prompt-len 32 --steps 256 --seed $s > $R/hfref$s.txt 2>&1; echo "hfref $s rc=$? $(( $(date +%s) - START ))s")
  timeout 60 $N $B model compare /tmp/ref$s --engine megakernel --json $R/cmp$s-megakernel.json > $R/cmp$s-megakernel.md 2>&1; echo "seed $s megakernel rc=$? $(tail -1 $R/cmp$s-megakernel.md)"
  QK_MEGAKERNEL_O_MERGE=0 timeout 60 $N $B model compare /tmp/ref$s --engine megakernel --json $R/cmp$s-omerge0.json > $R/cmp$s-omerge0.md 2>&1; echo "seed $s O_MERGE=0 rc=$? $(tail -1 $R/cmp$s-omerge0.md)"
  timeout 60 $N $B model compare /tmp/ref$s --engine layered --json $R/cmp$s-layered.json > $R/cmp$s-layered.md 2>&1; echo "seed $s layered rc=$? $(tail -1 $R/cmp$s-layered.md) $(( $(date +%s) - START ))s"
  rm -rf /tmp/ref$s
done
echo "t=$(( $(date +%s) - START ))s"
