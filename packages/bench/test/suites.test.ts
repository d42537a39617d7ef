/** The op suites on the CPU backend (GPU runs need the H100; these check the harness and every case builds). */
import { cudaAvailable, Rng } from '@qk/ops';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  chartsFor,
  measureHostCopyCeiling,
  OP_SUITES,
  OP_SUITES_BY_NAME,
  runOpSuite,
  suiteContext,
  timeCpu,
  validateReport,
} from '../src/index.js';

describe('timeCpu', () => {
  it('times every call, cycles the sets and reports positive order statistics', () => {
    const seen: number[] = [];
    const s = timeCpu([0, 1, 2], (i) => void seen.push(i), { warmup: 0, minSamples: 7, maxSamples: 7 });
    expect(seen).toEqual([0, 1, 2, 0, 1, 2, 0]);
    expect(s.samples).toBe(7);
    expect(s.min).toBeGreaterThan(0);
    expect(s.p10).toBeLessThanOrEqual(s.median);
    expect(s.median).toBeLessThanOrEqual(s.p90);
  });

  it('measures longer work as longer', () => {
    const spin = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    // A spin lasts at least its length, so lower bounds hold on any machine; a loaded machine (tests run in
    // parallel) can only stretch samples, so the ordering is checked on the fastest of many samples.
    const short = timeCpu([0], () => spin(0.2), { minSamples: 20, maxSamples: 20 });
    const long = timeCpu([0], () => spin(2), { minSamples: 5, maxSamples: 5 });
    expect(short.min).toBeGreaterThanOrEqual(200);
    expect(long.min).toBeGreaterThanOrEqual(2000);
    expect(short.min).toBeLessThan(long.min);
  });

  it('refuses no input sets', () => {
    expect(() => timeCpu([], () => {})).toThrow(/no input sets/);
  });
});

describe('measureHostCopyCeiling', () => {
  it('is a positive, finite bandwidth', () => {
    const c = measureHostCopyCeiling(8 * 2 ** 20);
    expect(Number.isFinite(c.gbPerS) && c.gbPerS > 0).toBe(true);
  });
});

describe('op suites', () => {
  // These tests run whole suites synchronously (10–20 s each on the CI machine). A turn of the event loop between
  // them lets the worker answer vitest's RPC: back to back, they held it past its 60 s timeout.
  beforeEach(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));

  it('have unique names and unique case ids on both backends, with peers only on the GPU', () => {
    expect(new Set(OP_SUITES.map((s) => s.name)).size).toBe(OP_SUITES.length);
    for (const suite of OP_SUITES_BY_NAME.values()) {
      for (const backend of ['cuda', 'cpu'] as const) {
        const cases = suite.cases(suiteContext(backend, 50 * 2 ** 20));
        expect(cases.length, `${suite.name} ${backend}`).toBeGreaterThan(0);
        expect(new Set(cases.map((c) => c.id)).size, suite.name).toBe(cases.length);
        for (const c of cases) {
          expect(c.bytes, c.id).toBeGreaterThan(0);
          expect(c.peer === undefined, c.id).toBe(backend === 'cpu');
        }
      }
    }
  });

  it('cover the seed configurations on the GPU', () => {
    const ids = (name: string) =>
      OP_SUITES_BY_NAME.get(name)!
        .cases(suiteContext('cuda', 50 * 2 ** 20))
        .map((c) => c.id);
    expect(ids('rmsnorm')).toEqual(
      expect.arrayContaining([
        'rmsnorm-1x128x4096',
        'rmsnorm-4x512x4096',
        'rmsnorm-8x256x4096',
        'rmsnorm-1x8192x4096',
      ]),
    );
    expect(ids('rope')).toEqual(expect.arrayContaining(['rope-512x32x128', 'rope-8192x32x128']));
    expect(ids('swiglu')).toEqual(expect.arrayContaining(['swiglu-2048x4096', 'swiglu-2048x18944']));
    expect(ids('norm-linear')).toEqual(
      expect.arrayContaining([
        'norm-linear-3584x3584-m1',
        'norm-linear-3584x3584-m2048',
        'norm-linear-glu-37888x3584-m2048',
      ]),
    );
    expect(ids('attention')).toEqual(
      expect.arrayContaining([
        'attention-full-b16-h32-kv32-s512-d64',
        'attention-causal-b1-h32-kv32-s4096-d128',
      ]),
    );
    expect(ids('linear-act')).toEqual(
      expect.arrayContaining(['linear-silu-128x4096x4096', 'linear-gelu-128x4096x4096']),
    );
    expect(ids('quant')).toEqual(
      expect.arrayContaining(['quant-int8-8b down-m1', 'quant-int4-8b down-m1', 'quant-bf16-8b down-m1']),
    );
    // Every M from 2 to 64 the issue names, on every 0.6B and 8B projection but the LM head.
    const smallM = ids('small-m');
    expect(smallM).toHaveLength(8 * 8);
    expect(smallM).toEqual(
      expect.arrayContaining([
        'quant-bf16-8b qkv-m2',
        'quant-bf16-8b gate_up-m64',
        'quant-bf16-0.6b down-m24',
      ]),
    );
    expect(smallM.some((id) => id.includes('lm_head'))).toBe(false);
  });

  // One suite per test, so that no synchronous stretch is longer than one suite.
  it.each(['rmsnorm', 'quant', 'small-m', 'attention'])(
    '%s runs on the CPU backend into a valid report with finite bandwidth and no peers',
    (name) => {
      const ceiling = { kind: 'host-copy' as const, gbPerS: 10 };
      const r = runOpSuite(OP_SUITES_BY_NAME.get(name)!, { backend: 'cpu', ceiling });
      expect(validateReport(r), name).toEqual([]);
      expect(r.status).toBe('ok');
      expect(r.rows.length).toBeGreaterThan(0);
      for (const row of r.rows) {
        expect(row.gbPerS! > 0 && Number.isFinite(row.gbPerS!)).toBe(true);
        expect(row.pctOfCeiling).toBeCloseTo((100 * row.gbPerS!) / 10, 9);
        expect(row.peers).toEqual({});
      }
      expect(r.peers.every((p) => !p.available && p.reason)).toBe(true);
      if (name === 'small-m') {
        // The sums table: one row per M, our sum matching the rows', no torch column without the peer.
        const sums = r.tables?.find((t) => t.title?.startsWith('Sums'));
        expect(sums?.rows.map((row) => row[0])).toEqual(['2', '16']);
        for (const row of sums!.rows) {
          const ours = r.rows
            .filter((x) => String(x.params.m) === row[0])
            .reduce((a, x) => a + x.timing.median, 0);
          expect(Number(row[1])).toBeCloseTo(ours, 1);
          expect(row[2]).toBe('—');
        }
      }
    },
  );

  it('filter keeps matching cases and narrows charts to the series left', () => {
    const r = runOpSuite(OP_SUITES_BY_NAME.get('attention')!, {
      backend: 'cpu',
      filter: 'decode',
      ceiling: { kind: 'host-copy', gbPerS: 10 },
    });
    expect(r.rows.every((row) => row.id.includes('decode'))).toBe(true);
    expect(r.charts.map((c) => c.id)).toEqual(['decode']);
    expect(validateReport(r)).toEqual([]);
  });

  it.runIf(!cudaAvailable())('a CUDA run without a GPU is a skipped report with the reason', () => {
    const r = runOpSuite(OP_SUITES_BY_NAME.get('rope')!, { backend: 'cuda' });
    expect(r.status).toBe('skipped');
    expect(r.skipReason).toMatch(/cuda|driver|GPU/i);
    expect(r.rows).toEqual([]);
    expect(validateReport(r)).toEqual([]);
  });
});

describe('chartsFor', () => {
  it('drops charts without rows and narrows series lists', () => {
    const rng = new Rng(5);
    const row = (series: string) => ({
      id: `${series}-${rng.nextInt(1e9)}`,
      series,
      label: series,
      x: 1,
      params: {},
      timing: { median: 1, p10: 1, p90: 1, min: 1, samples: 1 },
      peers: {},
    });
    const charts = [
      { id: 'a', title: 'A', y: 'time' as const, xLabel: '', yLabel: '', series: ['s1', 's2'] },
      { id: 'b', title: 'B', y: 'time' as const, xLabel: '', yLabel: '', series: ['s3'] },
      { id: 'c', title: 'C', y: 'time' as const, xLabel: '', yLabel: '' },
    ];
    const out = chartsFor(charts, [row('s2')]);
    expect(out.map((c) => [c.id, c.series])).toEqual([
      ['a', ['s2']],
      ['c', undefined],
    ]);
    expect(chartsFor(charts, [])).toEqual([]);
  });
});
