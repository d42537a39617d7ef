#!/usr/bin/env bash
# Device run 83f (v33): the block sum of the staged attention's weights written once (`block_sum` in attend_staged).
# Of the 21 kernels only the greedy staged kernel without the LM-head screen changes (40 instructions fewer; the
# other 20 disassemble identically). GPU tests; the 0.6B ids; greedy 256 with the screen off (QK_MEGAKERNEL_SCREEN=0,
# which runs that kernel at 57-384 keys) against the landed v33 addon (.device/v33.node.xz, baseline).
# The log also goes to $OUT/log-r83f.txt.
. "$(dirname "$0")/lib.sh"
BASE_NODE=.device/v33.node.xz
run_setup r83f baseline
{
gpu_tests
path_ids land $B X=1; echo "(v33, 82c/83e: d35acbad / bfd6e245 / 4b04bb84)"
for v in "new $B" "v33 $O"; do
  read -r n x <<< "$v"
  env QK_MEGAKERNEL_SCREEN=0 timeout 60 $N $x generate --preset 0.6b --engine megakernel --temperature 0 --max-tokens 256 --json "Tell me about the sea" > $R/greedy-noscreen-$n.json 2>/dev/null; echo "greedy no screen $n rc=$? $(ids $R/greedy-noscreen-$n.json)"
done
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83f.txt
