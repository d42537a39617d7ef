#!/usr/bin/env bash
# Device run 83b (v33): why 8B's 4096 row (83a) is slow. Stage traces (32 tokens, one step per launch) of Qwen3-8B at
# positions 1024, 2048 and 4096, the last also with the "roped" stamp after the passes (debug 64), and of 0.6B at 4096.
# The log also goes to $OUT/log-r83b.txt.
. "$(dirname "$0")/lib.sh"
run_setup r83b
tr() {  # NAME MODEL-ARGS POSITION ENV…
  local v=$1 m=$2 p=$3; shift 3
  env "$@" QK_MEGAKERNEL_TRACE=$R/trace-$v.json timeout 150 $N $B bench decode $m --engines megakernel --positions $p --tokens 32 --runs 1 --no-peers --no-layered > $R/trace-$v.log 2>&1; echo "trace $v rc=$? $(elapsed)"
}
{
timeout 200 $N $B model init --preset 8b --out /tmp/ref8 --force > $R/init8.txt 2>&1; echo "init 8b rc=$? $(elapsed)"
tr 8b-p1024 "--model /tmp/ref8" 1024
tr 8b-p2048 "--model /tmp/ref8" 2048
tr 8b-p4096 "--model /tmp/ref8" 4096
tr 8b-p4096-d64 "--model /tmp/ref8" 4096 QK_MEGAKERNEL_DEBUG=64
tr 8b-p3072 "--model /tmp/ref8" 3072
tr 06-p4096 "--preset 0.6b" 4096
grep -h "megakernel position" $R/trace-*.log | head
pack
python3 docs/h100/megakernel-v15/critical_path_long.py $R/trace-8b-p1024.json $R/trace-8b-p2048.json $R/trace-8b-p3072.json $R/trace-8b-p4096.json $R/trace-8b-p4096-d64.json $R/trace-06-p4096.json
xz -T4 $R/trace-*.json
pack
echo "t=$(elapsed)"
} 2>&1 | tee $OUT/log-r83b.txt
