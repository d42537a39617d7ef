#!/usr/bin/env python3
"""Warp 0's cycles per GEMV stage and layer from a trace of the diagnostic build (diag-waits-cycles.patch, debug bit
128), and the producer's waits per step.

Usage: gemv_cycles.py TRACE.json[.gz] [...]

The diagnostic build sums, over layers 2 to 25, warp 0's cycles in each GEMV stage: waiting for tiles (the full
barrier), the dot loops, the reductions and the epilogue, and the whole stage; it writes them after a base stamp into
the trace slots of layer 0 (events 1-16), and the producer's waits per step (free slots, the copy in flight) and its
tile count into events 17-20. The trace's sample step holds them as microseconds after the step's first stamp with
0.01 resolution, so a slot minus the base, times 1000, is the count.
"""
import gzip, json, sys

import numpy as np


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


for path in sys.argv[1:]:
    d = load(path)
    S = np.array(d['sampleStep'])
    base = S[:, 0]
    print(f"{path.split('/')[-1]}: step {d['stepUs']:.0f} µs (traced)")
    for si, name in enumerate(['QKV', 'O', 'gate/up', 'down']):
        wait, dot, red, total = [np.median((S[:, 1 + 4 * si + j] - base) * 1000 / 24) for j in range(4)]
        print(f'  {name:8} cycles per layer (median block): wait {wait:6.0f}  dot {dot:6.0f}  reductions+epilogue '
              f'{red:6.0f}  other {total - wait - dot - red:6.0f}  total {total:6.0f}')
    empty, inflight, tiles = (np.median(S[:, 18] - S[:, 17]), np.median(S[:, 19] - S[:, 17]),
                              np.median(S[:, 20] - S[:, 17]))
    print(f'  producer per step (median block): waits for a free slot {empty:.1f} µs, for the copy in flight '
          f'{inflight:.1f} µs, tiles {tiles:.0f}')
