#!/usr/bin/env bash
# Device run 61l (v12): SASS of the greedy G=2 kernel of 5a12b44 (final) and of the dropped m9c draft (flagged merge in
# one batch, counter merge through shared memory), for the codegen comparison in NOTES.md v12.
set -u
rm -rf /tmp/b && mkdir -p /tmp/b && tar -xJf .device/bundle.tar.xz -C /tmp/b
R=/tmp/r61l; mkdir -p $R
trap 'tar -czf $OUT/r61l.tgz -C /tmp r61l' EXIT
xz -dc .device/alt-m9c.node.xz > /tmp/m9c.node
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in final m9c; do F=/tmp/b/bundle/qk_cuda.node; [ $v = m9c ] && F=/tmp/m9c.node
  $CO -sass -fun '_ZN2qk46_GLOBAL__N__' $F > /dev/null 2>&1
  $CO -lelf $F > $R/elf-$v.txt 2>&1
  $CO -sass $F 2>/dev/null | awk '/Function : .*qwen3_decode_kernelILb0ELi2E/{p=1} p&&/Function : /&&!/qwen3_decode_kernelILb0ELi2E/{p=0} p' | xz -6 > $R/sass-$v.txt.xz
  echo "$v: $(xz -dc $R/sass-$v.txt.xz | grep -c '/\*[0-9a-f]*\*/') instructions"
done
