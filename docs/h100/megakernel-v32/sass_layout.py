#!/usr/bin/env python3
"""Where each kernel-level call site of the megakernel lies in a kernel's SASS, and the kernel's loops (NOTES.md v32).

This machine's CUDA 13 toolkit has no disassembler. Debian's non-free `nvidia-cuda-toolkit` (CUDA 11.8) has one
that reads sm_90 SASS once the cubin's ELF header is put in the older form (ABI version 7, e_flags of sm_90):
  echo 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: contrib non-free\n'\
'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > /etc/apt/sources.list.d/nonfree.sources
  apt-get update && (cd /tmp && apt-get download nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb /tmp/tk11)
Build a cubin with line info (from packages/cuda-core/csrc):
  nvcc -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -lineinfo -std=c++17 -isystem=/usr/local/cuda/include \
       -cubin -o /tmp/k.cubin megakernel/qwen3_decode.cu
Then: sass_layout.py /tmp/k.cubin megakernel/qwen3_decode.cu KERNEL [NVDISASM]
KERNEL is matched against the kernels' mangled names (e.g. Lb0ELi2ELb1ELi1ELin1E: greedy, query groups of 2, screened,
the staged kernel). Prints the runs of at least 2 KB that one kernel-level call site (the outermost inlined frame)
holds, then the loops (backward branches) of at least 256 bytes with their site and innermost function.
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'megakernel-v31'))
from code_size import function_at, functions  # noqa: E402


def old_header(cubin):
    """A copy of `cubin` whose ELF header the CUDA 11.8 disassembler reads (sm_90, ABI version 7)."""
    data = bytearray(open(cubin, 'rb').read())
    data[8] = 7
    struct.pack_into('<I', data, 0x30, 0x005A055A)
    fd, path = tempfile.mkstemp(suffix='.cubin')
    os.write(fd, bytes(data))
    os.close(fd)
    return path


def parse(sass, want, src):
    starts = functions(src)
    base = os.path.basename(src)

    def fn(line):
        return function_at(starts, line)

    ins, labels, chain, fresh, pending, inside = [], {}, [], [], [], False
    for line in sass.split('\n'):
        m = re.match(r'\s*\.section\s+\.text\.(\S+?),', line)
        if m:
            if inside:
                break
            inside = want in m.group(1)
            continue
        if not inside:
            continue
        m = re.match(r'^(\.L_x_\d+):', line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)', line)
        if m:
            fresh.append((os.path.basename(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m:
            if fresh:
                chain, fresh = fresh, []
            addr = int(m.group(1), 16)
            for p in pending:
                labels[p] = addr
            pending = []
            frames = [f for f in chain if f[0] == base]
            outer = frames[-1][1] if frames else 0
            callee = fn(frames[-2][1]) if len(frames) > 1 else fn(outer)
            inner = fn(frames[0][1]) if frames else (chain[0][0] if chain else '?')
            ins.append((addr, outer, callee, inner, m.group(2)))
    return ins, labels


def main():
    cubin, src, want = sys.argv[1], sys.argv[2], sys.argv[3]
    tool = sys.argv[4] if len(sys.argv) > 4 else '/tmp/tk11/usr/bin/nvdisasm'
    path = old_header(cubin)
    try:
        sass = subprocess.run([tool, '-gi', '-c', path], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    ins, labels = parse(sass, want, src)
    if not ins:
        sys.exit(f'no kernel matches {want}')
    print(f'{ins[-1][0] + 16} bytes')
    runs = []
    for addr, outer, callee, _, _ in ins:
        if runs and runs[-1][0] == (outer, callee):
            runs[-1][2] = addr
        else:
            runs.append([(outer, callee), addr, addr])
    print('call sites (runs of 2 KB or more): start-end bytes kernel-line callee')
    for (outer, callee), lo, hi in runs:
        if hi - lo + 16 >= 2048:
            print(f'  {lo:7d}-{hi + 16:7d} {hi - lo + 16:6d}  {outer:5d} {callee}')
    print('loops of 256 bytes or more: start-end bytes kernel-line callee / innermost function')
    for addr, outer, callee, inner, text in ins:
        m = re.search(r'\bBRA\b.*?\((\.L_x_\d+)\)', text)
        if m and labels.get(m.group(1), addr + 1) <= addr and addr + 16 - labels[m.group(1)] >= 256:
            lo = labels[m.group(1)]
            print(f'  {lo:7d}-{addr + 16:7d} {addr + 16 - lo:6d}  {outer:5d} {callee} / {inner}')


if __name__ == '__main__':
    main()
