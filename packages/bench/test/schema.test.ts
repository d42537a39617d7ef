import { describe, expect, it } from 'vitest';
import { BENCH_SCHEMA, type BenchReport, judgeBar, validateReport } from '../src/index.js';

function report(): BenchReport {
  return {
    schema: BENCH_SCHEMA,
    suite: 's',
    title: 'T',
    description: 'D',
    backend: 'cuda',
    status: 'ok',
    unit: 'us',
    machine: { node: 'v20', platform: 'linux', cpu: null, cpuCount: 2, commit: null, date: '2026-01-01' },
    ceiling: { kind: 'device-copy', gbPerS: 3000 },
    peers: [
      { name: 'torch-eager', label: 'PyTorch eager', available: true },
      { name: 'torch-compile', label: 'torch.compile', available: false, reason: 'disabled' },
    ],
    rows: [
      {
        id: 'a',
        series: 'k',
        label: 'A',
        x: 1,
        params: { n: 1 },
        timing: { median: 2, p10: 1.5, p90: 3, min: 1, samples: 25 },
        gbPerS: 100,
        pctOfCeiling: 3.3,
        peers: { 'torch-eager': { time: 4, ratio: 2 } },
        bar: { text: 'beat eager', met: true },
      },
    ],
    charts: [
      { id: 'c', title: 'C', y: 'gbPerS', xLabel: 'x', yLabel: 'y', series: ['k'], peers: ['torch-eager'] },
    ],
  };
}

describe('validateReport', () => {
  it('accepts a well-formed report', () => {
    expect(validateReport(report())).toEqual([]);
  });

  it('names every problem with its path', () => {
    const r = report() as unknown as Record<string, unknown> & BenchReport;
    const row = r.rows[0]!;
    r.rows.push({ ...row, timing: { ...row.timing, median: Number.NaN } }); // duplicate id, NaN median
    row.peers.nobody = { time: 1, ratio: 1 };
    r.charts[0]!.series = ['missing'];
    (r as { schema: string }).schema = 'qk.bench/1';
    const paths = validateReport(r).map((p) => p.path);
    expect(paths).toContain('schema');
    expect(paths).toContain('rows[1].id');
    expect(paths).toContain('rows[1].timing.median');
    expect(paths).toContain('rows[0].peers.nobody');
    expect(paths).toContain('charts[0].series');
  });

  it('requires a reason for skipped reports and unavailable peers', () => {
    const r = { ...report(), status: 'skipped' as const };
    r.peers = [{ name: 'p', label: 'P', available: false }];
    r.rows = [];
    r.charts = [];
    const paths = validateReport(r).map((p) => p.path);
    expect(paths).toEqual(expect.arrayContaining(['skipReason', 'peers[0].reason']));
  });

  it('refuses non-objects', () => {
    expect(validateReport(null)).toHaveLength(1);
    expect(validateReport([])).toHaveLength(1);
  });
});

describe('judgeBar', () => {
  const row = () => report().rows[0]!;
  it('checks the ceiling share and every named peer', () => {
    expect(judgeBar({ text: '', minPctOfCeiling: 3 }, row())).toBe(true);
    expect(judgeBar({ text: '', minPctOfCeiling: 80 }, row())).toBe(false);
    expect(judgeBar({ text: '', beat: ['torch-eager'] }, row())).toBe(true);
    const slower = row();
    slower.peers['torch-eager'] = { time: 1, ratio: 0.5 };
    expect(judgeBar({ text: '', beat: ['torch-eager'] }, slower)).toBe(false);
  });

  it('cannot judge a missing or failed peer, but a failed condition still fails', () => {
    expect(judgeBar({ text: '', beat: ['torch-compile'] }, row())).toBeNull();
    const failed = row();
    failed.peers['torch-eager'] = { error: 'boom' };
    expect(judgeBar({ text: '', beat: ['torch-eager'] }, failed)).toBeNull();
    expect(judgeBar({ text: '', minPctOfCeiling: 80, beat: ['torch-compile'] }, row())).toBe(false);
  });
});
