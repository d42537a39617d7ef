#!/usr/bin/env bash
# Device run 61n (v12): code-placement test. pad = the m9c draft + ~8 KB of never-taken code at the end of the
# attention (where m9c's code is 7.9 KB shorter than 5a12b44's), against 5a12b44 (final). Both QK_MEGAKERNEL_SKIP_ITEMS=66.
set -u
START=$(date +%s)
xz -dc .device/node.xz > /tmp/node && chmod +x /tmp/node
rm -rf /tmp/b /tmp/o && mkdir -p /tmp/b /tmp/o && tar -xJf .device/bundle.tar.xz -C /tmp/b && cp -r /tmp/b/bundle /tmp/o/bundle
xz -dc .device/alt-pad.node.xz > /tmp/o/bundle/qk_cuda.node
N=/tmp/node; B=/tmp/b/bundle/qk.mjs; O=/tmp/o/bundle/qk.mjs; R=/tmp/r61n; mkdir -p $R
trap 'tar -czf $OUT/r61n.tgz -C /tmp r61n' EXIT
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in final pad; do F=/tmp/b/bundle/qk_cuda.node; [ $v = pad ] && F=/tmp/o/bundle/qk_cuda.node
  $CO -sass $F 2>/dev/null | awk '/Function : .*qwen3_decode_kernelILb0ELi2E/{p=1} p&&/Function : /&&!/qwen3_decode_kernelILb0ELi2E/{p=0} p' | xz -6 > $R/sass-$v.txt.xz
  echo "$v: $(xz -dc $R/sass-$v.txt.xz | grep -c '/\*[0-9a-f]*\*/') instructions"
done
ids() { grep -o '"ids":\[[0-9,]*\]' "$1" | md5sum | cut -c1-8; }
QK_MEGAKERNEL_SKIP_ITEMS=66 timeout 60 $N $O generate --preset 0.6b --engine megakernel --max-tokens 256 --temperature 0 --json "Tell me about the sea" > $R/greedy-pad.json 2>/dev/null; echo "greedy pad rc=$? $(ids $R/greedy-pad.json) (aa30529c)"
for i in 1 2; do for v in final pad; do X=$B; [ $v = pad ] && X=$O
  QK_MEGAKERNEL_SKIP_ITEMS=66 timeout 100 $N $X bench decode --preset 0.6b --engines megakernel --positions 1,128,512,1024 --tokens 256 --runs 3 --no-peers --no-layered --markdown $R/ab-$v-$i.md > $R/ab-$v-$i.log 2>&1
  echo "$v $i rc=$? $(grep -E '^\| megakernel position' $R/ab-$v-$i.md | awk -F'|' '{printf "%s=%s ", $2, $4}')"
done; done
echo "t=$(( $(date +%s) - START ))s"
