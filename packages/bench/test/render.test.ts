import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { indexMarkdown, reportMarkdown } from '../src/render/markdown.js';
import { chartSvg } from '../src/render/svg.js';
import { readReport, renderReportDir, writeReports } from '../src/render/write.js';
import type { BenchIndex, BenchReport, BenchRow, ChartSpec, MachineInfo, PeerValue } from '../src/schema.js';

/** Numerical Recipes' LCG: reproducible "random" values without Math.random. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const MACHINE: MachineInfo = {
  node: 'v20.19.0',
  platform: 'linux 6.8.0',
  cpu: 'Test CPU',
  cpuCount: 16,
  commit: '0123456789ab',
  date: '2025-11-22T10:00:00.000Z',
  gpu: {
    name: 'NVIDIA H100 80GB HBM3',
    computeCapability: '9.0',
    driver: '13.0',
    cudaRuntime: '13.0',
    smCount: 132,
    memoryBytes: 80e9,
    l2Bytes: 50 * 2 ** 20,
  },
};

interface GenOptions {
  suite?: string;
  series?: string[];
  perSeries?: number;
  /** Peers measure each x once: every series at one x gets the same peer time. */
  sharedPeers?: boolean;
  tokens?: boolean;
}

/** A report with random timings; ratios follow the schema (peer time / qk time). */
function makeReport(seed: number, o: GenOptions = {}): BenchReport {
  const rnd = lcg(seed);
  const series = o.series ?? ['add', 'mul'];
  const ceiling = 2000 + rnd() * 1500;
  const rows: BenchRow[] = [];
  const peerAt = new Map<number, number>();
  series.forEach((s, si) => {
    for (let i = 0; i < (o.perSeries ?? 5); i++) {
      const x = 2 ** (12 + 3 * i);
      const bytes = x * 12;
      // Bandwidth grows with size toward the ceiling, as a memory-bound kernel's does.
      const median = bytes / (ceiling * (0.05 + 0.9 * (i / 5) + rnd() * 0.05) * 1e3);
      const gbPerS = bytes / (median * 1e-6) / 1e9;
      const peers: Record<string, PeerValue> = {};
      const k = rnd();
      if (k < 0.75) {
        const time = o.sharedPeers
          ? (peerAt.get(x) ?? median * (0.5 + rnd() * 2))
          : median * (0.5 + rnd() * 2);
        peerAt.set(x, time);
        peers['torch-eager'] = { time, ratio: time / median };
      } else if (k < 0.85) peers['torch-eager'] = { error: 'CUDA out of memory' };
      if (rnd() < 0.6) {
        const time = median * (0.3 + rnd() * 3);
        peers['torch-compile'] = { time, ratio: time / median };
      }
      rows.push({
        id: `${s}-${i}`,
        series: s,
        label: `case ${si}.${i} n=${x}`,
        x,
        params: { n: x, dtype: 'f32' },
        timing: {
          median,
          p10: median * (1 - rnd() * 0.1),
          p90: median * (1 + rnd() * 0.2),
          min: median * 0.9,
          samples: 50,
        },
        bytes,
        gbPerS,
        pctOfCeiling: (100 * gbPerS) / ceiling,
        ...(o.tokens ? { tokPerS: 1e6 / median } : {}),
        peers,
        ...(i % 2 === 0
          ? { bar: { text: `≥ ${i}× eager`, met: i === 0 ? true : i === 2 ? false : null } }
          : {}),
      });
    }
  });
  const charts: ChartSpec[] = [
    {
      id: 'bandwidth',
      title: 'Bandwidth',
      y: 'gbPerS',
      xLabel: 'bytes',
      yLabel: 'GB/s',
      logX: true,
      peers: ['torch-eager'],
    },
    {
      id: 'time',
      title: 'Time',
      y: 'time',
      xLabel: 'bytes',
      yLabel: 'µs per call',
      logX: true,
      peers: ['torch-compile'],
    },
  ];
  return {
    schema: 'qk.bench/2',
    suite: o.suite ?? 'ops',
    title: `qk ${o.suite ?? 'ops'} suite`,
    description: 'Elementwise kernels against PyTorch, measured in one run.',
    backend: 'cuda',
    status: 'ok',
    machine: MACHINE,
    ceiling: { kind: 'device-copy', gbPerS: ceiling },
    unit: 'us',
    peers: [
      { name: 'torch-eager', label: 'torch eager', available: true, version: 'torch 2.9.0' },
      { name: 'torch-compile', label: 'torch.compile', available: true, version: 'torch 2.9.0' },
      { name: 'hf', label: 'HF transformers', available: false, reason: 'transformers not installed' },
    ],
    rows,
    charts,
    notes: ['Rotating inputs cover twice the L2 cache.'],
  };
}

function skipped(suite: string): BenchReport {
  return {
    ...makeReport(1, { suite }),
    status: 'skipped',
    skipReason: 'no CUDA device (cudaGetDeviceCount returned 0)',
    rows: [],
  };
}

const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Splits a Markdown table line on unescaped pipes. */
const cells = (line: string): string[] =>
  line
    .slice(1, -1)
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());

/** The first Markdown table of a document: header, alignment row, body. */
function firstTable(md: string): { header: string[]; align: string[]; body: string[][] } {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => l.startsWith('|'));
  const block: string[] = [];
  for (let i = start; i >= 0 && i < lines.length && lines[i]!.startsWith('|'); i++) block.push(lines[i]!);
  const [header, align, ...body] = block.map(cells);
  return { header: header ?? [], align: align ?? [], body };
}

describe('reportMarkdown', () => {
  const report = makeReport(42, { series: ['add', 'mul', 'silu'] });
  const md = reportMarkdown(report);
  const t = firstTable(md);

  it('lists every row label exactly once, with its own values', () => {
    expect(t.body).toHaveLength(report.rows.length);
    for (const r of report.rows) {
      const hits = t.body.filter((b) => b[0] === r.label);
      expect(hits).toHaveLength(1);
      expect(hits[0]![1]).toBe(r.series);
    }
    expect(new Set(t.body.map((b) => b.length))).toEqual(new Set([t.header.length]));
  });

  it('computes ratio columns as peer time / qk time', () => {
    for (const [name, label] of [
      ['torch-eager', 'torch eager'],
      ['torch-compile', 'torch.compile'],
    ] as const) {
      const col = t.header.indexOf(`× ${label}`);
      expect(col).toBeGreaterThan(0);
      for (const r of report.rows) {
        const got = t.body.find((b) => b[0] === r.label)![col];
        const v = r.peers[name];
        if (v === undefined) expect(got).toBe('—');
        else if ('error' in v) expect(got).toBe('error');
        else expect(Number(got)).toBeCloseTo(v.time / r.timing.median, 2);
      }
    }
  });

  it('has the expected columns, numbers right-aligned', () => {
    expect(t.header).toEqual([
      'case',
      'series',
      'qk µs',
      'p10–p90',
      'GB/s',
      '% ceiling',
      'torch eager µs',
      '× torch eager',
      'torch.compile µs',
      '× torch.compile',
      'bar',
    ]);
    t.header.forEach((h, i) => {
      expect(t.align[i]).toBe(['case', 'series', 'bar'].includes(h) ? '---' : '---:');
    });
  });

  it('states machine, ceiling, peers that did not run and bars', () => {
    expect(md.startsWith('# qk ops suite\n')).toBe(true);
    expect(md).toContain('NVIDIA H100 80GB HBM3 (CC 9.0, driver 13.0, CUDA 13.0)');
    expect(md).toContain(
      `Copy ceiling measured in this run: ${report.ceiling!.gbPerS.toFixed(0)} GB/s (device-to-device, bytes read + written)`,
    );
    expect(md).toContain('HF transformers did not run: transformers not installed');
    expect(md).not.toContain('HF transformers µs');
    expect(md).toContain('torch 2.9.0');
    const bar = t.header.indexOf('bar');
    for (const r of report.rows) {
      const got = t.body.find((b) => b[0] === r.label)![bar];
      if (!r.bar) expect(got).toBe('');
      else expect(got).toBe(`${r.bar.text} ${r.bar.met === true ? '✓' : r.bar.met === false ? '✗' : '?'}`);
    }
    expect(md).toContain('- Rotating inputs cover twice the L2 cache.');
  });

  it('formats times by magnitude', () => {
    const r = makeReport(3, { series: ['one'], perSeries: 3 });
    const medians = [5.4321, 123.456, 4567.8];
    r.rows.forEach((row, i) => {
      row.timing = { ...row.timing, median: medians[i]! };
    });
    const body = firstTable(reportMarkdown(r)).body;
    expect(body.map((b) => b[1])).toEqual(['5.43', '123.5', '4568']);
  });

  it('drops columns nothing fills and adds tok/s when rows carry it', () => {
    const r = makeReport(5, { series: ['decode'], tokens: true });
    for (const row of r.rows) {
      delete row.gbPerS;
      delete row.pctOfCeiling;
      delete row.bar;
    }
    const { header, align } = firstTable(reportMarkdown(r));
    expect(header).not.toContain('series');
    expect(header).not.toContain('GB/s');
    expect(header).not.toContain('bar');
    expect(align[header.indexOf('tok/s')]).toBe('---:');
    r.unit = 'ms';
    expect(firstTable(reportMarkdown(r)).header[1]).toBe('qk ms');
  });

  it('renders a skipped report as its reason, without a table', () => {
    const s = skipped('decode');
    const out = reportMarkdown(s, { headingLevel: 3 });
    expect(out.startsWith('### qk decode suite\n')).toBe(true);
    expect(out).toContain(`Skipped: ${s.skipReason}`);
    expect(out.split('\n').some((l) => l.startsWith('|'))).toBe(false);
  });

  it('escapes pipes in cells and leaves no trailing spaces', () => {
    const r = makeReport(7);
    r.rows[0]!.label = 'a|b | c';
    r.peers[0]!.label = 'torch|eager';
    r.tables = [
      { title: 'Speedups', header: ['variant', 'x | y'], numeric: [false, true], rows: [['v|1', '1.5']] },
    ];
    const out = reportMarkdown(r, { chartLinks: true });
    expect(out).toContain('| a\\|b \\| c |');
    expect(out).toContain('× torch\\|eager');
    expect(out).toContain('**Speedups**');
    expect(out).toContain('| variant | x \\| y |\n| --- | ---: |\n| v\\|1 | 1.5 |');
    for (const line of out.split('\n')) {
      expect(line).toBe(line.trimEnd());
      if (line.startsWith('|')) expect(line.endsWith('|')).toBe(true);
    }
    const main = firstTable(out);
    expect(new Set(main.body.map((b) => b.length))).toEqual(new Set([main.header.length]));
    expect(out).toContain('![Bandwidth](ops-bandwidth.svg)');
    expect(out).toContain('![Time](ops-time.svg)');
    expect(reportMarkdown(r)).not.toContain('.svg)');
  });
});

describe('indexMarkdown', () => {
  it('summarises every suite, then every section in order', () => {
    const reports = [
      makeReport(11, { suite: 'ops' }),
      skipped('decode'),
      makeReport(12, { suite: 'prefill' }),
    ];
    const index: BenchIndex = {
      schema: 'qk.bench/2',
      machine: MACHINE,
      suites: reports.map((r) => ({
        suite: r.suite,
        title: r.title,
        backend: r.backend,
        status: r.status,
        ...(r.skipReason ? { skipReason: r.skipReason } : {}),
        file: `${r.suite}.json`,
      })),
    };
    const out = indexMarkdown(index, reports);
    expect(out.startsWith('# qk benchmark report\n')).toBe(true);
    const summary = firstTable(out);
    expect(summary.header).toEqual(['suite', 'backend', 'status', 'rows', 'reason']);
    expect(summary.body.map((b) => [b[0], b[2], b[3]])).toEqual(
      reports.map((r) => [r.suite, r.status, String(r.rows.length)]),
    );
    expect(summary.body[1]![4]).toBe(reports[1]!.skipReason);
    const headings = out.split('\n').filter((l) => l.startsWith('## '));
    expect(headings).toEqual(reports.map((r) => `## ${r.title}`));
    expect(out).toContain('![Bandwidth](prefill-bandwidth.svg)');
    for (const line of out.split('\n')) expect(line).toBe(line.trimEnd());
  });
});

/** Checks that every tag closes in order and that text holds no raw markup characters. */
function assertWellFormed(svg: string): void {
  const stack: string[] = [];
  const re = /<[^<>]*>/g;
  let last = 0;
  let roots = 0;
  for (let m = re.exec(svg); m; m = re.exec(svg)) {
    const text = svg.slice(last, m.index);
    expect(text).not.toMatch(/[<>]/);
    expect(text).not.toMatch(/&(?!(amp|lt|gt|quot|apos|#\d+);)/);
    last = re.lastIndex;
    const tag = m[0];
    expect(tag).not.toMatch(/&(?!(amp|lt|gt|quot|apos|#\d+);)/);
    expect((tag.match(/"/g) ?? []).length % 2).toBe(0);
    if (tag.startsWith('</')) expect(stack.pop()).toBe(tag.slice(2, -1).trim());
    else {
      const name = /^<([A-Za-z][\w:-]*)/.exec(tag)?.[1];
      expect(name).toBeDefined();
      if (stack.length === 0) roots++;
      if (!tag.endsWith('/>')) stack.push(name!);
    }
  }
  expect(svg.slice(last).trim()).toBe('');
  expect(stack).toEqual([]);
  expect(roots).toBe(1);
  expect(svg.startsWith('<svg ')).toBe(true);
}

/** Every coordinate-like attribute value, polyline points and translations. */
function coordinates(svg: string): { xs: number[]; ys: number[] } {
  const xs: number[] = [];
  const ys: number[] = [];
  for (const m of svg.matchAll(/\s(x|y|x1|y1|x2|y2|cx|cy)="([^"]*)"/g))
    (m[1]!.startsWith('x') || m[1] === 'cx' ? xs : ys).push(Number(m[2]));
  for (const m of svg.matchAll(/points="([^"]*)"/g)) {
    for (const pair of m[1]!.split(' ')) {
      const [x, y] = pair.split(',');
      xs.push(Number(x));
      ys.push(Number(y));
    }
  }
  for (const m of svg.matchAll(/translate\(([^ )]+) ([^ )]+)\)/g)) {
    xs.push(Number(m[1]));
    ys.push(Number(m[2]));
  }
  return { xs, ys };
}

const polylines = (svg: string) =>
  [...svg.matchAll(/<polyline points="([^"]*)"[^>]*stroke="([^"]+)"/g)].map((m) => ({
    points: m[1]!.split(' ').length,
    colour: m[2]!,
  }));
/** The drawing's size from its viewBox (which must start at the origin). */
function viewBox(svg: string): { w: number; h: number } {
  const m = /viewBox="0 0 (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)"/.exec(svg);
  expect(m, 'a viewBox at the origin').not.toBeNull();
  return { w: Number(m![1]), h: Number(m![2]) };
}

const tips = (svg: string, name: string) =>
  [...svg.matchAll(/<title>([^<]*)<\/title>/g)].map((m) => m[1]!).filter((t) => t.startsWith(`${name}: `));

describe('chartSvg', () => {
  const report = makeReport(99, { series: ['add', 'mul', 'silu'], sharedPeers: true });
  const bw = report.charts[0]!;
  const svg = chartSvg(report, bw);

  it('is well-formed, bounded and finite', () => {
    for (const chart of report.charts) {
      const out = chartSvg(report, chart);
      assertWellFormed(out);
      const { xs, ys } = coordinates(out);
      expect(xs.length).toBeGreaterThan(20);
      const { w, h } = viewBox(out);
      expect(w).toBeGreaterThan(h);
      for (const x of xs) expect(x >= 0 && x <= w).toBe(true);
      for (const y of ys) expect(y >= 0 && y <= h).toBe(true);
      expect(out).toContain('font-family="sans-serif"');
      expect(out).not.toMatch(/<script|@import|href=|NaN|Infinity/);
    }
  });

  it('draws one polyline per series and per peer, the peer once per x', () => {
    const lines = polylines(svg);
    expect(lines).toHaveLength(4);
    expect(lines.slice(0, 3).map((l) => l.points)).toEqual([5, 5, 5]);
    const peerXs = new Set(
      report.rows
        .filter((r) => r.peers['torch-eager'] && !('error' in r.peers['torch-eager']))
        .map((r) => r.x),
    );
    expect(lines[3]!.points).toBe(peerXs.size);
    expect(new Set(lines.map((l) => l.colour)).size).toBe(4);
    expect(svg.match(/stroke-dasharray="6 4"/g)).toHaveLength(1);
    expect(svg).toContain('>torch eager</text>');
  });

  it('derives peer values from the peer time', () => {
    const fmt = (v: number) => String(Number(v.toPrecision(4)));
    const firstPerX = new Map<number, BenchRow>();
    for (const r of report.rows) {
      const v = r.peers['torch-compile'];
      if (v && !('error' in v) && !firstPerX.has(r.x)) firstPerX.set(r.x, r);
    }
    const expected = [...firstPerX.values()]
      .sort((a, b) => a.x - b.x)
      .map(
        (r) => `torch.compile: x ${fmt(r.x)}, y ${fmt((r.peers['torch-compile'] as { time: number }).time)}`,
      );
    expect(tips(chartSvg(report, report.charts[1]!), 'torch.compile')).toEqual(expected);
    const bwTips = tips(svg, 'torch eager');
    const eager = [
      ...new Map(
        report.rows
          .filter((r) => r.peers['torch-eager'] && 'time' in r.peers['torch-eager'])
          .map((r) => [r.x, r] as const),
      ).keys(),
    ];
    expect(bwTips).toHaveLength(eager.length);
    for (const r of report.rows) {
      const v = r.peers['torch-eager'];
      if (!v || 'error' in v) continue;
      // GB/s scales with 1 / time: the peer moved the same bytes in its own time.
      const gb = r.bytes! / (v.time * 1e-6) / 1e9;
      expect(bwTips.some((t) => t.endsWith(`, y ${fmt(gb)}`))).toBe(true);
    }
  });

  it('draws the ceiling only on bandwidth charts of reports that have one', () => {
    expect(svg.match(/class="ceiling"/g)).toHaveLength(1);
    expect(svg).toContain(`copy ceiling ${report.ceiling!.gbPerS.toFixed(0)} GB/s`);
    expect(chartSvg(report, report.charts[1]!)).not.toContain('ceiling');
    const noCeiling = clone(report);
    delete noCeiling.ceiling;
    expect(chartSvg(noCeiling, bw)).not.toContain('ceiling');
    // The ceiling sits far above tiny bandwidths and must still be inside the plot.
    const low = clone(report);
    for (const r of low.rows) r.gbPerS = 1;
    const out = chartSvg(low, bw);
    const y = Number(/class="ceiling" x1="[^"]*" y1="([^"]*)"/.exec(out)?.[1]);
    expect(y).toBeGreaterThan(40);
  });

  it('keeps the legend beside the plot and colours by first appearance', () => {
    const legendX = Number(/<g class="legend">\n<rect x="([^"]*)"/.exec(svg)?.[1]);
    const { xs } = coordinates(svg.slice(0, svg.indexOf('<g class="legend">')));
    expect(Math.max(...xs)).toBeLessThan(legendX);
    const more = clone(report);
    more.rows.push({ ...clone(more.rows[0]!), id: 'extra', series: 'zeta', peers: {} });
    const a = polylines(svg).map((l) => l.colour);
    const b = polylines(chartSvg(more, bw)).map((l) => l.colour);
    expect(b.slice(0, 3)).toEqual(a.slice(0, 3));
  });

  it('skips non-finite values and filters series', () => {
    const r = clone(report);
    r.rows[1]!.gbPerS = Number.NaN;
    r.rows[2]!.gbPerS = Number.POSITIVE_INFINITY;
    const out = chartSvg(r, { ...bw, peers: [] });
    assertWellFormed(out);
    expect(polylines(out).map((l) => l.points)).toEqual([3, 5, 5]);
    expect(out).not.toMatch(/NaN|Infinity/);
    const only = chartSvg(r, { ...bw, series: ['mul'], peers: [] });
    expect(polylines(only).map((l) => l.points)).toEqual([5]);
  });

  it('says "no data" when nothing can be plotted', () => {
    for (const chart of [
      { ...bw, y: 'tokPerS' as const, peers: [] },
      { ...bw, series: ['nothing'] },
    ]) {
      const out = chartSvg(report, chart);
      assertWellFormed(out);
      expect(out).toContain('no data');
      expect(out).not.toContain('<polyline');
    }
    const empty = { ...report, rows: [] };
    expect(chartSvg(empty, bw)).toContain('no data');
  });

  it('copes with a single point, one x value, equal values and x = 0 on a log axis', () => {
    const rnd = lcg(5);
    const cases: BenchReport[] = [];
    const one = clone(report);
    one.rows = one.rows.slice(0, 1);
    cases.push(one);
    const sameX = clone(report);
    for (const row of sameX.rows) row.x = 4096;
    cases.push(sameX);
    const flat = clone(report);
    for (const row of flat.rows) row.gbPerS = 0;
    delete flat.ceiling;
    cases.push(flat);
    const zeroX = clone(report);
    zeroX.rows[0]!.x = 0;
    cases.push(zeroX);
    const narrow = clone(report);
    for (const row of narrow.rows) row.x = 3 + rnd() * 0.9;
    cases.push(narrow);
    for (const r of cases) {
      for (const chart of [bw, { ...bw, logX: false }, r.charts[1]!]) {
        const out = chartSvg(r, chart);
        assertWellFormed(out);
        const { xs, ys } = coordinates(out);
        const { w, h } = viewBox(out);
        for (const x of xs) expect(x >= 0 && x <= w).toBe(true);
        for (const y of ys) expect(y >= 0 && y <= h).toBe(true);
      }
    }
    expect(polylines(chartSvg(zeroX, bw))[0]!.points).toBe(4);
    expect(polylines(chartSvg(zeroX, { ...bw, logX: false }))[0]!.points).toBe(5);
  });

  it('escapes text and is deterministic', () => {
    const r = clone(report);
    r.rows[0]!.series = 'a<b & "c"\u0001';
    const chart = { ...bw, title: 'x < y & "z" > w', xLabel: '<bytes>' };
    const out = chartSvg(r, chart);
    assertWellFormed(out);
    expect(out).toContain('x &lt; y &amp; &quot;z&quot; &gt; w');
    expect(out).toContain('&lt;bytes&gt;');
    expect(out).toContain('a&lt;b &amp; &quot;c&quot;');
    expect([...out].some((ch) => ch.charCodeAt(0) < 9)).toBe(false);
    expect(chartSvg(clone(r), clone(chart))).toBe(out);
  });

  it('labels a log axis compactly', () => {
    expect(svg).toMatch(/>4k<\/text>/);
    expect(svg).toMatch(/>256k<\/text>/);
    const wide = clone(report);
    wide.rows.forEach((row, i) => {
      row.x = 10 ** (i % 8) * 3;
    });
    expect(chartSvg(wide, bw)).toMatch(/>1M<\/text>/);
    expect(chartSvg(wide, bw)).toMatch(/>10k<\/text>/);
  });
});

describe('writeReports / readReport / renderReportDir', () => {
  const tmp = () => mkdtempSync(join(tmpdir(), 'qk-render-'));
  const reports = () => [
    makeReport(21, { suite: 'ops' }),
    skipped('decode'),
    makeReport(22, { suite: 'prefill', tokens: true }),
  ];

  it('writes every report, its page, its charts, the index and the README', () => {
    const dir = join(tmp(), 'out');
    const rs = reports();
    const index = writeReports(dir, rs);
    expect(readdirSync(dir).sort()).toEqual(
      [
        'README.md',
        'decode.json',
        'decode.md',
        'index.json',
        'ops-bandwidth.svg',
        'ops-time.svg',
        'ops.json',
        'ops.md',
        'prefill-bandwidth.svg',
        'prefill-time.svg',
        'prefill.json',
        'prefill.md',
      ].sort(),
    );
    expect(JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'))).toEqual(index);
    expect(index.machine).toEqual(MACHINE);
    expect(index.suites.map((s) => [s.suite, s.status, s.file])).toEqual([
      ['ops', 'ok', 'ops.json'],
      ['decode', 'skipped', 'decode.json'],
      ['prefill', 'ok', 'prefill.json'],
    ]);
    expect(index.suites[1]!.skipReason).toBe(rs[1]!.skipReason);
    for (const r of rs) {
      expect(readReport(join(dir, `${r.suite}.json`))).toEqual(r);
      expect(readFileSync(join(dir, `${r.suite}.json`), 'utf8')).toBe(`${JSON.stringify(r, null, 1)}\n`);
    }
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('# qk benchmark report');
    const other = { ...MACHINE, commit: 'fedcba987654' };
    expect(writeReports(tmp(), rs, { machine: other }).machine).toEqual(other);
  });

  it('refuses invalid reports and duplicate suites before writing anything', () => {
    const dupRow = reports();
    dupRow[2]!.rows[1]!.id = dupRow[2]!.rows[0]!.id;
    const badMedian = reports();
    badMedian[0]!.rows[0]!.timing.median = Number.POSITIVE_INFINITY;
    const dupSuite = reports();
    dupSuite[2]!.suite = 'ops';
    const outside = reports();
    outside[0]!.suite = '../ops';
    for (const [rs, message] of [
      [dupRow, /duplicate id/],
      [badMedian, /timing\.median/],
      [dupSuite, /suite "ops"/],
      [outside, /file name/],
    ] as const) {
      const dir = join(tmp(), 'out');
      expect(() => writeReports(dir, rs)).toThrow(message);
      expect(existsSync(dir)).toBe(false);
    }
  });

  it('names the file when it is not JSON or not a report', () => {
    const dir = tmp();
    const file = join(dir, 'broken.json');
    writeFileSync(file, '{"schema": "qk.bench/2",');
    expect(() => readReport(file)).toThrow(file);
    writeFileSync(file, '{"schema": "qk.bench/1"}');
    expect(() => readReport(file)).toThrow(new RegExp(`${file.replace(/[\\.]/g, '\\$&')}.*not a valid`, 's'));
  });

  it('re-renders a directory to identical pages and charts', () => {
    const dir = tmp();
    const index = writeReports(dir, reports());
    const derived = readdirSync(dir).filter((f) => f.endsWith('.md') || f.endsWith('.svg'));
    const before = new Map(derived.map((f) => [f, readFileSync(join(dir, f), 'utf8')]));
    for (const f of derived) writeFileSync(join(dir, f), 'stale');
    expect(renderReportDir(dir)).toEqual(index);
    for (const f of derived) expect(readFileSync(join(dir, f), 'utf8')).toBe(before.get(f));
    writeFileSync(join(dir, 'ops.json'), 'nope');
    expect(() => renderReportDir(dir)).toThrow(join(dir, 'ops.json'));
  });
});
