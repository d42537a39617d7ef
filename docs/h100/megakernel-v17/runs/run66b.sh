#!/usr/bin/env bash
# Device run 66b: one-instruction bf16 conversions (p1) against v16 (01d2952): the SASS instruction mix of the greedy
# G = 2 kernel, p1's GPU tests and greedy ids (bit-identical expected: aa30529c), then v16 and p1 alternating, 3 rounds.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/p && mkdir -p /tmp/b /tmp/p && tar -xJf .device/bundle-v16.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/p/bundle
xz -dc .device/p1.node.xz > /tmp/p/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; P=/tmp/p/bundle/qk.mjs; R=/tmp/r66b; rm -rf $R; mkdir -p $R
trap 'tar -czf $OUT/r66b.tgz -C /tmp r66b' EXIT
CUOBJ=/usr/local/cuda/bin/cuobjdump
for v in b p; do
  $CUOBJ -sass /tmp/$v/bundle/qk_cuda.node 2>/dev/null | awk '/Function : .*qwen3_decode_kernelILb0ELi2E/{f=1} /Function : /{if($0!~/qwen3_decode_kernelILb0ELi2E/)f=0} f' > $R/sass-$v.txt
  echo "$v: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' $R/sass-$v.txt) instr, FFMA $(grep -c ' FFMA ' $R/sass-$v.txt), PRMT $(grep -c ' PRMT ' $R/sass-$v.txt), IMAD.U32 $(grep -c ' IMAD.U32 ' $R/sass-$v.txt), SHF.L.U32 $(grep -c ' SHF.L.U32 ' $R/sass-$v.txt), LOP3 $(grep -c ' LOP3' $R/sass-$v.txt)"
done
xz -T4 $R/sass-*.txt
cp .device/gputest/megakernel-test.mjs /tmp/p/bundle/
(cd /tmp/p/bundle && timeout 200 $N megakernel-test.mjs > $R/megakernel-test.txt 2>&1; echo "p1 megakernel tests rc=$? $(( $(date +%s) - START ))s"; grep -E "FAIL|passed" $R/megakernel-test.txt | head -8)
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
timeout 60 $N $P generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-p1.json 2>/dev/null; echo "p1 greedy rc=$? $(ids $R/greedy-p1.json) (v16: aa30529c)"
timeout 60 $N $P generate --preset 0.6b --engine megakernel --max-tokens 256 --seed 1 --json "Tell me about the sea" > $R/sampled-p1.json 2>/dev/null; echo "p1 sampled rc=$? $(ids $R/sampled-p1.json) (v16: dc211a68)"
run() {  # name, bundle
  local v=$1 X=$2
  timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}' | sed 's/megakernel position //g') $(( $(date +%s) - START ))s"
}
for i in 1 2 3; do run v16 $B; run p1 $P; done
