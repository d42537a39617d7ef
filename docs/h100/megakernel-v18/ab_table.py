#!/usr/bin/env python3
"""A/B table of a device run's `qk bench decode --markdown` files (ab-NAME-ROUND.md): for each build or knob and each
position, the median of the rounds' medians and the range from the lowest p10 to the highest p90 over the rounds, µs
per token. Usage: ab_table.py RUN_DIR [NAME ...]"""
import collections
import glob
import os
import re
import statistics
import sys

run = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(os.path.join(run, 'ab-*.md'))):
    name = re.match(r'ab-(.+)-(\d+)\.md$', os.path.basename(path)).group(1)
    for line in open(path):
        m = re.match(r'\| megakernel position (\d+) \| ([\d.]+) \| ([\d.]+)–([\d.]+) \|', line)
        if m:
            rows[name][int(m.group(1))].append(tuple(float(x) for x in m.groups()[1:]))
names = sys.argv[2:] or list(rows)
positions = sorted({p for n in names for p in rows[n]})
print('| build, knob | rounds | ' + ' | '.join(str(p) for p in positions) + ' |')
print('| --- | ---: | ' + ' | '.join('---:' for _ in positions) + ' |')
for n in names:
    cells = []
    for p in positions:
        r = rows[n].get(p)
        cells.append(f'{statistics.median(x[0] for x in r):.1f} ({min(x[1] for x in r):.1f}–{max(x[2] for x in r):.1f})'
                     if r else '')
    count = max(len(v) for v in rows[n].values())
    print(f'| {n} | {count} | ' + ' | '.join(cells) + ' |')
