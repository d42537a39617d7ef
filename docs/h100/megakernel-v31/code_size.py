#!/usr/bin/env python3
"""SASS bytes of the megakernel's kernels, and of one kernel by source function (NOTES.md v31, section 4).

Build a cubin with line info first, from packages/cuda-core/csrc:
  nvcc -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -lineinfo -std=c++17 -isystem=/usr/local/cuda/include \
       -cubin -o /tmp/k.cubin megakernel/qwen3_decode.cu
Then: code_size.py /tmp/k.cubin megakernel/qwen3_decode.cu [KERNEL]
KERNEL (default Lb0ELi2ELb1ELi0E: argmax, query groups of 2, screened LM head, both attention paths: the kernel v31's
benchmarks ran; since v32, Lb0ELi2ELb1ELi1E is the staged kernel) is matched against the kernels' mangled names. The
per-function bytes come from the line table (readelf --debug-dump=decodedline): each address range is charged to the
innermost source line it maps to, so inlined helpers are counted where they are defined (dot8, bf2_lo, ...), and the
lines of other files by file name.
"""
import collections
import re
import subprocess
import sys


def text_sizes(cubin):
    out = subprocess.run(['readelf', '-SW', cubin], capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        m = re.search(r'\]\s+(\.text\.\S+)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)', line)
        if m:
            sizes[m.group(1)[len('.text.'):]] = int(m.group(2), 16)
    return sizes


def sequences(cubin):
    out = subprocess.run(['readelf', '--debug-dump=decodedline', cubin], capture_output=True, text=True).stdout
    seqs, cur = [], []
    for line in out.splitlines():
        m = re.match(r'^(\S+)\s+(\d+)\s+(0x[0-9a-f]+|0)\s', line)
        if not m:
            continue
        entry = (m.group(1), int(m.group(2)), int(m.group(3), 16))
        if cur and entry[2] == 0 and cur[-1][2] > 0:
            seqs.append(cur)
            cur = []
        cur.append(entry)
    if cur:
        seqs.append(cur)
    return seqs


def functions(src):
    starts = []
    pattern = r'^(?:template <[^>]*>\s*)?(?:static )?(?:__device__|__global__|__host__ __device__)[^(]*?(\w+)\s*\('
    for i, line in enumerate(open(src).read().split('\n'), 1):
        m = re.match(pattern, line.replace('__launch_bounds__(kThreads, 1) ', ''))
        if m:
            starts.append((i, m.group(1)))
    return starts


def function_at(starts, line):
    """The function of `starts` (functions()' list) that source line `line` lies in, or '?'."""
    name = '?'
    for s, n in starts:
        if s > line:
            break
        name = n
    return name


def main():
    cubin, src = sys.argv[1], sys.argv[2]
    want = sys.argv[3] if len(sys.argv) > 3 else 'Lb0ELi2ELb1ELi0E'
    sizes = text_sizes(cubin)
    for name, size in sorted(sizes.items(), key=lambda kv: kv[1]):
        print(f'{size:8d} {name}')
    target = [n for n in sizes if 'qwen3_decode_kernel' in n and want in n]
    if len(target) != 1:
        sys.exit(f'{len(target)} kernels match {want}')
    size = sizes[target[0]]
    # The line table's sequences are not named: take the one whose last address is the kernel's size (within a
    # few instructions), and say which when more than one kernel has that size.
    seqs = [s for s in sequences(cubin) if abs(s[-1][2] - size) <= 4096]
    same = [n for n, v in sizes.items() if abs(v - size) <= 4096 and n != target[0]]
    if not seqs:
        sys.exit('no line-table sequence of that size')
    if same:
        print(f'(kernels of about the same size: {", ".join(same)}; the first sequence of that size is taken)')
    starts = functions(src)
    base = src.split('/')[-1]

    def fn(line):
        return function_at(starts, line)

    per = collections.Counter()
    seq = seqs[0]
    for a, b in zip(seq, seq[1:]):
        per[fn(a[1]) if a[0] == base else a[0]] += b[2] - a[2]
    print(f'\n{target[0]}: {size} bytes; by source function:')
    for name, n in per.most_common(30):
        print(f'{n:8d} {name}')


if __name__ == '__main__':
    main()
