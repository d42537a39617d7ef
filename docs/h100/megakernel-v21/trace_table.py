#!/usr/bin/env python3
"""Prints the stage table of megakernel traces (QK_MEGAKERNEL_TRACE summaries, .json or .json.xz) side by side.

usage: trace_table.py TRACE [TRACE ...]   (one column per trace: µs per step, each stage's mean over the blocks)
"""
import json
import lzma
import os
import sys


def load(path):
    opener = lzma.open if path.endswith('.xz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def main(paths):
    if not paths:
        sys.exit(__doc__)
    traces = [load(p) for p in paths]
    names = [os.path.basename(p).split('.json')[0] for p in paths]
    stages = [s['stage'] for s in traces[0]['stages']]
    for t, p in zip(traces, paths):
        if [s['stage'] for s in t['stages']] != stages:
            sys.exit(f'{p}: other stages than {paths[0]}')
    print('| stage | ' + ' | '.join(names) + ' |')
    print('| --- |' + ' ---: |' * len(names))
    for i, stage in enumerate(stages):
        print(f'| {stage} | ' + ' | '.join(f"{t['stages'][i]['meanUs']:.1f}" for t in traces) + ' |')
    print('| step (µs) | ' + ' | '.join(f"{t['stepUs']:.1f}" for t in traces) + ' |')


if __name__ == '__main__':
    main(sys.argv[1:])
