#!/usr/bin/env python3
"""Critical path of a megakernel layer from a trace's raw stamps (`sampleStep`, QK_MEGAKERNEL_TRACE).

Each segment runs from the moment the LAST block reached one event to the moment the last block reached the next, so
the segments of a layer add up to the layer's time on the critical path. Blocks 0-7 are the attention blocks at
positions up to 55 (one item per KV head, no QKV or O rows); pass --attention-blocks N for other cases.
Usage: critical_path.py TRACE.json[.gz] [...]  (medians over layers 2 to layers-2)
"""
import gzip, json, statistics as st, sys

PER_LAYER = 17


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def segments(S, att_blocks):
    G = len(S)
    layers = (len(S[0]) - 3) // PER_LAYER
    att = range(att_blocks)
    rest = range(att_blocks, G)
    out = {}
    for l in range(2, layers - 1):
        b0 = l * PER_LAYER
        last = lambda e, blocks=range(G): max(S[b][b0 + e] for b in blocks if S[b][b0 + e] >= 0)
        prev = max(S[b][b0 - 1] for b in range(G))
        q_in, q_end = last(1), last(3, rest)
        a_q, a_end = last(5, att), last(7, att)
        o_in, o_end = last(8, rest), last(10, rest)
        g_in, g_end, d_in, d_end = last(11), last(13), last(14), last(16)
        for name, v in [
            ('residual hop + RMSNorm -> QKV input', q_in - prev),
            ('QKV GEMV', q_end - q_in),
            ('hop -> attention has q/k/v', a_q - q_end),
            ('attention', a_end - a_q),
            ('hop -> O input', o_in - a_end),
            ('O GEMV', o_end - o_in),
            ('hop + RMSNorm -> gate/up input', g_in - o_end),
            ('gate/up GEMV', g_end - g_in),
            ('hop -> down input', d_in - g_end),
            ('down GEMV', d_end - d_in),
            ('layer', d_end - prev),
        ]:
            out.setdefault(name, []).append(v)
    return {k: st.median(v) for k, v in out.items()}


def main():
    args = sys.argv[1:]
    att = 8
    if '--attention-blocks' in args:
        i = args.index('--attention-blocks')
        att = int(args[i + 1])
        del args[i:i + 2]
    cols = [(p, segments(load(p)['sampleStep'], att)) for p in args]
    names = list(cols[0][1].keys())
    print('µs (median over layers)'.ljust(36) + ''.join(p.split('/')[-1][:14].rjust(16) for p, _ in cols))
    for n in names:
        print(n.ljust(36) + ''.join(f'{c[n]:16.2f}' for _, c in cols))


if __name__ == '__main__':
    main()
