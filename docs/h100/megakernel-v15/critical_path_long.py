#!/usr/bin/env python3
"""Critical path of a megakernel step at long contexts, from a trace's raw stamps (`sampleStep`, QK_MEGAKERNEL_TRACE).

v11's critical_path.py assumes that the attention blocks take no QKV or O rows (short contexts). From about 448 keys
(Qwen3-0.6B) every block takes rows of every stage, so here every segment runs from the moment the LAST block of the
grid reached one event to the moment the last block reached the next. Layers 2 to layers-2, medians; then the step's
tail: all layers, final RMSNorm, LM head, argmax. With QK_MEGAKERNEL_DEBUG=64 the stamp "roped" moves to after the
attention passes, so "rope (+ passes with debug 64)" then holds the passes and "attention after" the merge.
Usage: critical_path_long.py TRACE.json[.gz] [...]
"""
import gzip
import json
import statistics as st
import sys

PER_LAYER = 17


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def analyze(d):
    S = d['sampleStep']
    grid = len(S)
    layers = (len(S[0]) - 3) // PER_LAYER
    rows = {}
    for layer in range(2, layers - 1):
        b0 = layer * PER_LAYER
        prev = max(S[b][b0 - 1] for b in range(grid))

        def last(e):
            return max(S[b][b0 + e] for b in range(grid) if S[b][b0 + e] >= 0)

        for name, v in [
            ('residual hop + RMSNorm -> QKV input', last(1) - prev),
            ('QKV GEMV', last(3) - last(1)),
            ('hop -> attention has q/k/v', last(5) - last(3)),
            ('rope (+ passes with debug 64)', last(6) - last(5)),
            ('attention after that stamp', last(7) - last(6)),
            ('hop -> O input', last(8) - last(7)),
            ('O GEMV', last(10) - last(8)),
            ('hop + RMSNorm -> gate/up input', last(11) - last(10)),
            ('gate/up GEMV', last(13) - last(11)),
            ('hop -> down input', last(14) - last(13)),
            ('down GEMV', last(16) - last(14)),
            ('layer', last(16) - prev),
        ]:
            rows.setdefault(name, []).append(v)
    out = {k: st.median(v) for k, v in rows.items()}
    t0 = min(S[b][0] for b in range(grid))
    end_layers = max(S[b][layers * PER_LAYER - 1] for b in range(grid))
    tail = [max(S[b][layers * PER_LAYER + k] for b in range(grid) if S[b][layers * PER_LAYER + k] >= 0) for k in range(3)]
    out['step: all layers'] = end_layers - t0
    out['step: final RMSNorm'] = tail[0] - end_layers
    out['step: LM head'] = tail[1] - tail[0]
    out['step: argmax'] = tail[2] - tail[1]
    out['step: mean µs (stepUs)'] = d['stepUs']
    return out


def main():
    cols = [(p.split('/')[-1][:22], analyze(load(p))) for p in sys.argv[1:]]
    print('µs'.ljust(40) + ''.join(name.rjust(24) for name, _ in cols))
    for n in cols[0][1]:
        print(n.ljust(40) + ''.join(f'{c[n]:24.2f}' for _, c in cols))


if __name__ == '__main__':
    main()
