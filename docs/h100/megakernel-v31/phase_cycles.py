#!/usr/bin/env python3
"""The staged attention's phases in cycles from two stage traces of one build (QK_MEGAKERNEL_DEBUG 128 and 256).

With those diagnostics, thread 0 of each staged block writes clock64 at the ends of its phases, in cycles after the
rows landed plus the globaltimer at that moment, over its layer's stamps 0-3 (128: phases 0-3, 256: phases 4-7); its
stamp 6 is taken at the rows' landing. So stamp i minus stamp 6 (the trace reader gives microseconds to 10 ns) times 1000 is cycles.
Phases: 0 scores (before the barrier), 1 after the barrier (max and, with STAGED_HF=3, sum), 2 after the weights
and their barrier, 3 after the division and its barrier (V·P starts), 4 warp 0's V·P done, 5 after the barrier that
hands dims 112-127's odd chain to warp 5, 6 after the last barrier. Prints medians over layers 2-26 and blocks 0-7.
Usage: phase_cycles.py TRACE-d128.json TRACE-d256.json
"""
import json, statistics as st, sys

PER_LAYER = 17


def phases(path, base):
    S = json.load(open(path))['sampleStep']
    layers = (len(S[0]) - 3) // PER_LAYER
    out = {}
    for l in range(2, layers - 1):
        b0 = l * PER_LAYER
        for b in range(8):
            for i in range(4):
                out.setdefault(base + i, []).append(1000 * (S[b][b0 + i] - S[b][b0 + 6]))
    return out


def main():
    a = phases(sys.argv[1], 0)
    a.update(phases(sys.argv[2], 4))
    names = ['scores', 'max barrier', 'weights', 'division', 'V.P warp 0', 'exchange', 'done', '(unused)']
    print('  '.join(f'{names[i]} {st.median(a[i]):.0f}' for i in range(7)))


if __name__ == '__main__':
    main()
