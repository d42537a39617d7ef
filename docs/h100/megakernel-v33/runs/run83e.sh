#!/usr/bin/env bash
# Device run 83e (v33, closing): the final tree's bundle (the v33 addon, the hand-offs of runs 83c/83d): the GPU tests
# of the megakernel and layered engines, the 0.6B ids (greedy 256 and 400, sampled 256), and a generation with the
# default engine. The log also goes to $OUT/log-r83e.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83e
{
gpu_tests
cp .device/gputest/layered-test.mjs /tmp/b/bundle/
(cd /tmp/b/bundle && timeout 200 $N layered-test.mjs > "$R/layered-test.txt" 2>&1; echo "layered tests rc=$? $(elapsed)"; grep -E "FAIL|passed|failed" -A3 "$R/layered-test.txt" | head -16)
path_ids land $B X=1; echo "(v33, 82c: d35acbad / bfd6e245 / 4b04bb84)"
timeout 60 $N $B generate --preset 0.6b --temperature 0 --max-tokens 256 --json "Tell me about the sea" > $R/default-engine.json 2>$R/default-engine.err; echo "default engine rc=$? $(ids $R/default-engine.json) $(grep -o '"engine":"[a-z]*"' $R/default-engine.json | head -1) $(grep -o '"decodeTokensPerSecond":[0-9.]*' $R/default-engine.json)"
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83e.txt
