#!/usr/bin/env bash
# Device run 79d (v30): the SM clock inside the kernel. QK_MEGAKERNEL_DEBUG 1024 writes each layer's stamp 1 as its
# stamp 0 plus clock64 mod 2^20 read at the same moment, so every block's cycles per ns over layers 2-26 can be read
# off a trace: at 20 keys (one chunk), 140 and 260 (staged by default), off (chunks), flash-style; and 600 (chunks).
. "$(dirname "$0")/lib.sh"
run_setup r79d
for p in 20 140 260 600; do
  for v in "hf X=1" "off QK_MEGAKERNEL_STAGED_UNTIL=0" "f QK_MEGAKERNEL_STAGED_HF=0"; do
    read -r name e <<< "$v"
    if [ $p = 20 ] || [ $p = 600 ]; then [ $name = hf ] || continue; fi
    env $e QK_MEGAKERNEL_DEBUG=1024 QK_MEGAKERNEL_TRACE=$R/trace-$name-p$p.json timeout 100 $N $B bench decode --preset 0.6b --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$name-p$p.log 2>&1; echo "trace $name $p rc=$? $(elapsed)"
  done
done
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
