/**
 * SVG line charts of `qk.bench/2` reports: self-contained (no scripts, fonts or stylesheets) and deterministic,
 * so charts can be committed and diffed, and redrawn from a saved report without the GPU.
 */
import type { BenchReport, BenchRow, ChartSpec } from '../schema.js';

const W = 900;
const H = 420;
const PLOT = { left: 72, top: 48, right: 572, bottom: 356 } as const;
const LEGEND = { x: 588, width: 304, item: 16 } as const;
/** d3's category10: ten hues that stay apart for the common forms of colour blindness better than a rainbow. */
const PALETTE = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
] as const;

interface Point {
  x: number;
  y: number;
}

interface Series {
  name: string;
  peer: boolean;
  points: Point[];
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Coordinates with one decimal keep files small and byte-stable. */
const c1 = (v: number): string => String(Math.round(v * 10) / 10);

/** Everything outside XML 1.0's `Char` production (control characters, lone surrogates, U+FFFE/U+FFFF). */
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

/** Escapes text for XML content and attribute values; drops characters XML 1.0 cannot carry at all. */
export function escapeXml(text: string): string {
  return text
    .replace(NOT_XML_CHAR, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Series names often share a prefix and differ at the end ("… layer 3"), so legends keep both ends. */
function clipMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = Math.ceil((max - 1) / 2);
  return `${text.slice(0, head)}…${text.slice(text.length - (max - 1 - head))}`;
}

function yValue(chart: ChartSpec, row: BenchRow): number | undefined {
  const v = chart.y === 'gbPerS' ? row.gbPerS : chart.y === 'tokPerS' ? row.tokPerS : row.timing?.median;
  return isNum(v) && v >= 0 ? v : undefined;
}

/** The qk series of the chart, then one series per requested peer, each sorted by x. */
function collectSeries(report: BenchReport, chart: ChartSpec): Series[] {
  const wanted = chart.series && chart.series.length > 0 ? new Set(chart.series) : undefined;
  const xOk = (x: number) => isNum(x) && (!chart.logX || x > 0);
  const rows = report.rows.filter((r) => (!wanted || wanted.has(r.series)) && xOk(r.x));
  const groups = new Map<string, Point[]>();
  for (const r of rows) {
    const y = yValue(chart, r);
    if (y === undefined) continue;
    let pts = groups.get(r.series);
    if (!pts) groups.set(r.series, (pts = []));
    pts.push({ x: r.x, y });
  }
  const out: Series[] = [...groups].map(([name, points]) => ({ name, peer: false, points }));
  // Several qk series often share one peer measurement per x (e.g. variants of one op): plot it once, unless the
  // chart says each series has its own peer measurement (different shapes at the same x).
  const peerGroups = chart.peersPerSeries ? [...groups.keys()] : [undefined];
  for (const name of new Set(chart.peers ?? [])) {
    const label = report.peers.find((p) => p.name === name)?.label ?? name;
    for (const series of peerGroups) {
      const byX = new Map<number, number>();
      for (const r of rows) {
        if (series !== undefined && r.series !== series) continue;
        const v = r.peers?.[name];
        if (!v || 'error' in v || byX.has(r.x)) continue;
        if (!isNum(v.time) || v.time <= 0 || !isNum(v.ratio) || v.ratio <= 0) continue;
        const own = chart.y === 'time' ? undefined : yValue(chart, r);
        // ratio = peer time / qk time, so a rate scales by 1 / ratio.
        const y = chart.y === 'time' ? v.time : own === undefined ? undefined : own / v.ratio;
        if (y !== undefined && isNum(y)) byX.set(r.x, y);
      }
      const seriesName = series === undefined ? label : `${label} (${series})`;
      out.push({ name: seriesName, peer: true, points: [...byX].map(([x, y]) => ({ x, y })) });
    }
  }
  for (const s of out) s.points.sort((a, b) => a.x - b.x);
  return out.filter((s) => s.points.length > 0);
}

/** 1, 2, 2.5 or 5 times a power of ten, at least `raw`. */
function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * mag;
}

/** Drops binary noise such as 0.30000000000000004. */
const tidy = (v: number): number => Number(v.toPrecision(12));

function trimNum(v: number): string {
  const a = Math.abs(v);
  if (a >= 100) return String(Math.round(v));
  if (a >= 1) return String(Number(v.toFixed(1)));
  return String(Number(v.toPrecision(2)));
}

/** 1500 → "1.5k", 2e6 → "2M", 1e9 → "1G"; small numbers stay plain. */
export function compactNumber(v: number): string {
  const a = Math.abs(v);
  for (const [scale, unit] of [
    [1e12, 'T'],
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ] as const) {
    if (a >= scale) return `${trimNum(v / scale)}${unit}`;
  }
  return trimNum(v);
}

/** Powers of two read best with binary multiples: 2^12 → "4k", 2^20 → "1M". */
function pow2Label(e: number): string {
  if (e < 10) return trimNum(2 ** e);
  const k = Math.min(5, Math.floor(e / 10));
  return `${2 ** (e - 10 * k)}${'kMGTP'[k - 1]}`;
}

interface Tick {
  value: number;
  label: string;
}

function linearLabels(values: number[], step: number): Tick[] {
  const big = values.some((v) => Math.abs(v) >= 1e4);
  const digits = Math.min(6, Math.max(0, Math.ceil(-Math.log10(step) - 1e-9)));
  return values.map((value) => ({ value, label: big ? compactNumber(value) : value.toFixed(digits) }));
}

/** Multiples of a nice step inside [lo, hi]. */
function linearTicks(lo: number, hi: number, count: number): Tick[] {
  const step = niceStep((hi - lo) / count);
  const values: number[] = [];
  for (let i = Math.ceil(lo / step - 1e-9); i * step <= hi + step * 1e-9; i++) values.push(tidy(i * step));
  return linearLabels(values, step);
}

interface XScale {
  map: (x: number) => number;
  ticks: Tick[];
}

function xScale(xs: number[], log: boolean): XScale {
  let lo = Math.min(...xs);
  let hi = Math.max(...xs);
  const span = PLOT.right - PLOT.left;
  if (log) {
    let l0 = Math.log10(lo);
    let l1 = Math.log10(hi);
    if (l1 - l0 < 1e-12) [l0, l1] = [l0 - Math.log10(2), l1 + Math.log10(2)];
    const pad = (l1 - l0) * 0.04;
    [l0, l1] = [l0 - pad, l1 + pad];
    const map = (x: number) => PLOT.left + ((Math.log10(x) - l0) / (l1 - l0)) * span;
    // Powers of two while the range is short (sizes, lengths), powers of ten beyond 2^16.
    const base = Math.log2(hi / lo) <= 16 ? 2 : 10;
    const logb = (v: number) => Math.log10(v) / Math.log10(base);
    const e0 = Math.ceil(logb(10 ** l0) - 1e-9);
    const e1 = Math.floor(logb(10 ** l1) + 1e-9);
    const stride = Math.max(1, Math.ceil((e1 - e0 + 1) / 10));
    const ticks: Tick[] = [];
    for (let e = e0; e <= e1; e++) {
      if (((e % stride) + stride) % stride !== 0) continue;
      ticks.push({ value: base ** e, label: base === 2 ? pow2Label(e) : compactNumber(10 ** e) });
    }
    // A narrow range may hold no power at all: label its ends instead.
    if (ticks.length === 0) {
      const ends = lo === hi ? [lo] : [lo, hi];
      return { map, ticks: ends.map((value) => ({ value, label: compactNumber(value) })) };
    }
    return { map, ticks };
  }
  if (hi - lo < 1e-12 * Math.max(1, Math.abs(hi))) {
    const d = Math.abs(lo) * 0.5 || 1;
    [lo, hi] = [lo - d, hi + d];
  }
  const pad = (hi - lo) * 0.04;
  const [d0, d1] = [lo - pad, hi + pad];
  return { map: (x) => PLOT.left + ((x - d0) / (d1 - d0)) * span, ticks: linearTicks(d0, d1, 6) };
}

function header(chart: ChartSpec): string[] {
  const title = escapeXml(clip(chart.title, 80));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif" font-size="11" role="img" aria-label="${title}">`,
    `<title>${title}</title>`,
    `<rect x="0" y="0" width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${W / 2}" y="28" text-anchor="middle" font-size="15" font-weight="bold" fill="#222222">${title}</text>`,
  ];
}

function defaultYLabel(report: BenchReport, chart: ChartSpec): string {
  if (chart.yLabel) return chart.yLabel;
  if (chart.y === 'gbPerS') return 'GB/s';
  if (chart.y === 'tokPerS') return 'tokens/s';
  return `time (${report.unit === 'us' ? 'µs' : 'ms'})`;
}

const fmtValue = (v: number): string => String(Number(v.toPrecision(4)));

function legend(series: Series[], colours: string[]): string[] {
  const room = Math.floor((PLOT.bottom - PLOT.top - 12) / LEGEND.item);
  const shown = series.length > room ? series.slice(0, room - 1) : series;
  const more = series.length - shown.length;
  const rows = shown.length + (more > 0 ? 1 : 0);
  const out = [
    `<g class="legend">`,
    `<rect x="${LEGEND.x}" y="${PLOT.top}" width="${LEGEND.width}" height="${rows * LEGEND.item + 10}" fill="#ffffff" stroke="#cccccc"/>`,
  ];
  shown.forEach((s, i) => {
    const y = PLOT.top + 5 + i * LEGEND.item + LEGEND.item / 2;
    const colour = colours[i]!;
    const dash = s.peer ? ' stroke-dasharray="5 3"' : '';
    out.push(
      `<line x1="${LEGEND.x + 8}" y1="${c1(y)}" x2="${LEGEND.x + 30}" y2="${c1(y)}" stroke="${colour}" stroke-width="2"${dash}/>`,
      `<circle cx="${LEGEND.x + 19}" cy="${c1(y)}" r="3" fill="${s.peer ? '#ffffff' : colour}" stroke="${colour}"/>`,
      `<text x="${LEGEND.x + 36}" y="${c1(y + 4)}" fill="#222222">${escapeXml(clipMiddle(s.name, 40))}</text>`,
    );
  });
  if (more > 0) {
    const y = PLOT.top + 5 + shown.length * LEGEND.item + LEGEND.item / 2 + 4;
    out.push(`<text x="${LEGEND.x + 8}" y="${c1(y)}" fill="#555555">+${more} more</text>`);
  }
  out.push('</g>');
  return out;
}

/**
 * Draws one chart of a report as a standalone SVG line chart: one polyline with markers per series (rows grouped
 * by `series`, sorted by x), dashed series for the requested peers (derived from each row's peer time), the copy
 * ceiling for bandwidth charts, nice ticks (log x on request) and a legend beside the plot. Never throws on odd
 * data: non-finite values are skipped and a chart with nothing to plot says "no data".
 */
export function chartSvg(report: BenchReport, chart: ChartSpec): string {
  const series = collectSeries(report, chart);
  const out = header(chart);
  const midX = (PLOT.left + PLOT.right) / 2;
  const midY = (PLOT.top + PLOT.bottom) / 2;
  if (series.length === 0) {
    out.push(
      `<text class="no-data" x="${W / 2}" y="${H / 2}" text-anchor="middle" font-size="14" fill="#777777">no data</text>`,
    );
    return `${[...out, '</svg>'].join('\n')}\n`;
  }
  const ceiling =
    chart.y === 'gbPerS' && isNum(report.ceiling?.gbPerS) && report.ceiling.gbPerS > 0
      ? report.ceiling.gbPerS
      : undefined;

  const ys = series.flatMap((s) => s.points.map((p) => p.y));
  const yMaxData = Math.max(...ys, ceiling ?? 0);
  const yMax = yMaxData > 0 ? yMaxData : 1;
  const yStep = niceStep(yMax / 5);
  // Headroom keeps the top point (and the ceiling label) off the title.
  const yTop = tidy(Math.ceil((yMax * 1.04) / yStep - 1e-9) * yStep);
  const yTicks = linearTicks(0, yTop, 5);
  const sy = (y: number) => PLOT.bottom - (y / yTop) * (PLOT.bottom - PLOT.top);
  const xs = xScale(
    series.flatMap((s) => s.points.map((p) => p.x)),
    chart.logX === true,
  );

  out.push('<g class="grid" stroke="#e6e6e6" stroke-width="1">');
  for (const t of yTicks)
    out.push(`<line x1="${PLOT.left}" y1="${c1(sy(t.value))}" x2="${PLOT.right}" y2="${c1(sy(t.value))}"/>`);
  for (const t of xs.ticks)
    out.push(
      `<line x1="${c1(xs.map(t.value))}" y1="${PLOT.top}" x2="${c1(xs.map(t.value))}" y2="${PLOT.bottom}"/>`,
    );
  out.push('</g>', '<g class="axes" fill="#333333">');
  out.push(
    `<line x1="${PLOT.left}" y1="${PLOT.bottom}" x2="${PLOT.right}" y2="${PLOT.bottom}" stroke="#333333"/>`,
    `<line x1="${PLOT.left}" y1="${PLOT.top}" x2="${PLOT.left}" y2="${PLOT.bottom}" stroke="#333333"/>`,
  );
  for (const t of yTicks) {
    const y = c1(sy(t.value));
    out.push(
      `<line x1="${PLOT.left - 4}" y1="${y}" x2="${PLOT.left}" y2="${y}" stroke="#333333"/>`,
      `<text x="${PLOT.left - 7}" y="${c1(sy(t.value) + 4)}" text-anchor="end">${escapeXml(t.label)}</text>`,
    );
  }
  for (const t of xs.ticks) {
    const x = c1(xs.map(t.value));
    out.push(
      `<line x1="${x}" y1="${PLOT.bottom}" x2="${x}" y2="${PLOT.bottom + 4}" stroke="#333333"/>`,
      `<text x="${x}" y="${PLOT.bottom + 17}" text-anchor="middle">${escapeXml(t.label)}</text>`,
    );
  }
  out.push(
    `<text x="${midX}" y="${H - 14}" text-anchor="middle" font-size="12">${escapeXml(clip(chart.xLabel, 70))}</text>`,
    `<text transform="translate(18 ${midY}) rotate(-90)" text-anchor="middle" font-size="12">${escapeXml(clip(defaultYLabel(report, chart), 50))}</text>`,
    '</g>',
  );

  if (ceiling !== undefined) {
    const y = c1(sy(ceiling));
    out.push(
      `<line class="ceiling" x1="${PLOT.left}" y1="${y}" x2="${PLOT.right}" y2="${y}" stroke="#555555" stroke-width="1.5" stroke-dasharray="7 4"/>`,
      `<text class="ceiling-label" x="${PLOT.right - 4}" y="${c1(sy(ceiling) - 5)}" text-anchor="end" fill="#555555">copy ceiling ${ceiling.toFixed(0)} GB/s</text>`,
    );
  }

  const colours = series.map((_, i) => PALETTE[i % PALETTE.length]!);
  series.forEach((s, i) => {
    const colour = colours[i]!;
    const dash = s.peer ? ' stroke-dasharray="6 4"' : '';
    const pts = s.points.map((p) => `${c1(xs.map(p.x))},${c1(sy(p.y))}`).join(' ');
    out.push(
      `<g class="${s.peer ? 'series peer' : 'series'}">`,
      `<polyline points="${pts}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`,
    );
    for (const p of s.points) {
      const fill = s.peer ? '#ffffff' : colour;
      const tip = escapeXml(`${s.name}: x ${fmtValue(p.x)}, y ${fmtValue(p.y)}`);
      out.push(
        `<circle cx="${c1(xs.map(p.x))}" cy="${c1(sy(p.y))}" r="3" fill="${fill}" stroke="${colour}"><title>${tip}</title></circle>`,
      );
    }
    out.push('</g>');
  });
  out.push(...legend(series, colours), '</svg>');
  return `${out.join('\n')}\n`;
}
