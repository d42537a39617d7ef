/**
 * Markdown rendering of `qk.bench/2` reports. Everything is derived from the report alone, so a saved report can
 * be re-rendered without the machine it ran on. Every number column says what it is measured in.
 */
import type { BenchIndex, BenchReport, BenchRow, BenchTable, MachineInfo, PeerValue } from '../schema.js';

/** Options of {@link reportMarkdown}. */
export interface ReportMarkdownOptions {
  /** Link each chart as `![title](<suite>-<chart.id>.svg)` (the files `writeReports` writes beside it). */
  chartLinks?: boolean;
  /** Level of the section heading (1–6, default 1). */
  headingLevel?: number;
}

/** File name of a chart's SVG, relative to the report directory. */
export function chartFileName(suite: string, chartId: string): string {
  return `${suite}-${chartId}.svg`;
}

const UNIT_TEXT = { us: 'µs', ms: 'ms' } as const;
const MISSING = '—';

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Times keep about three significant digits without switching to exponents. */
export function formatTime(v: number | undefined): string {
  if (!isNum(v)) return MISSING;
  const a = Math.abs(v);
  return v.toFixed(a < 100 ? 2 : a < 1000 ? 1 : 0);
}

const fixed = (v: number | undefined, digits: number): string => (isNum(v) ? v.toFixed(digits) : MISSING);

/** A table cell: pipes would end the cell and newlines the row. */
function cell(text: string): string {
  return text
    .replace(/\r?\n|\r/g, ' ')
    .replace(/\|/g, '\\|')
    .trim();
}

/** A GFM table; `numeric[i]` right-aligns column i. */
function table(
  header: readonly string[],
  numeric: readonly boolean[],
  rows: readonly (readonly string[])[],
): string[] {
  const width = Math.max(header.length, ...rows.map((r) => r.length));
  const pad = (r: readonly string[]) => Array.from({ length: width }, (_, i) => cell(r[i] ?? ''));
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`.replace(/ {2,}\|/g, ' |');
  return [
    line(pad(header)),
    line(Array.from({ length: width }, (_, i) => (numeric[i] ? '---:' : '---'))),
    ...rows.map((r) => line(pad(r))),
  ];
}

/** One line of machine facts: what measured (GPU or CPU), node, commit, date. */
export function machineLine(machine: MachineInfo, backend?: BenchReport['backend']): string {
  const parts: string[] = [];
  const gpu = machine.gpu;
  // A CPU-backend suite measured the CPU even when a GPU is present, so name what was measured.
  if (gpu && backend !== 'cpu') {
    parts.push(
      `GPU ${gpu.name} (CC ${gpu.computeCapability}, driver ${gpu.driver}, CUDA ${gpu.cudaRuntime})`,
    );
  } else {
    const count = isNum(machine.cpuCount) && machine.cpuCount > 0 ? ` (${machine.cpuCount} threads)` : '';
    parts.push(`CPU ${machine.cpu ?? 'unknown'}${count}`);
  }
  parts.push(`node ${machine.node}`, `commit ${machine.commit ?? 'unknown'}`, machine.date);
  return `**Machine:** ${parts.join(' · ')}`;
}

function ceilingLine(report: BenchReport): string | undefined {
  const c = report.ceiling;
  if (!c || !isNum(c.gbPerS)) return undefined;
  const how = c.kind === 'host-copy' ? 'host memory copy' : 'device-to-device';
  return `Copy ceiling measured in this run: ${c.gbPerS.toFixed(0)} GB/s (${how}, bytes read + written)`;
}

const peerTime = (v: PeerValue | undefined): string =>
  v === undefined ? MISSING : 'error' in v ? 'error' : formatTime(v.time);
const peerRatio = (v: PeerValue | undefined): string =>
  v === undefined ? MISSING : 'error' in v ? 'error' : fixed(v.ratio, 2);

const BAR_MARK = { true: ' ✓', false: ' ✗', null: ' ?' } as const;

interface Column {
  header: string;
  numeric: boolean;
  value: (row: BenchRow) => string;
}

function mainColumns(report: BenchReport): Column[] {
  const rows = report.rows;
  const unit = UNIT_TEXT[report.unit];
  const cols: Column[] = [{ header: 'case', numeric: false, value: (r) => r.label }];
  if (new Set(rows.map((r) => r.series)).size > 1)
    cols.push({ header: 'series', numeric: false, value: (r) => r.series });
  cols.push(
    { header: `qk ${unit}`, numeric: true, value: (r) => formatTime(r.timing.median) },
    {
      header: 'p10–p90',
      numeric: true,
      value: (r) => `${formatTime(r.timing.p10)}–${formatTime(r.timing.p90)}`,
    },
  );
  if (rows.some((r) => isNum(r.gbPerS)))
    cols.push({ header: 'GB/s', numeric: true, value: (r) => fixed(r.gbPerS, 0) });
  if (rows.some((r) => isNum(r.pctOfCeiling))) {
    cols.push({ header: '% ceiling', numeric: true, value: (r) => fixed(r.pctOfCeiling, 1) });
  }
  if (rows.some((r) => isNum(r.tokPerS)))
    cols.push({ header: 'tok/s', numeric: true, value: (r) => fixed(r.tokPerS, 1) });
  for (const p of report.peers) {
    if (!p.available) continue;
    cols.push(
      { header: `${p.label} ${unit}`, numeric: true, value: (r) => peerTime(r.peers[p.name]) },
      { header: `× ${p.label}`, numeric: true, value: (r) => peerRatio(r.peers[p.name]) },
    );
  }
  if (rows.some((r) => r.bar !== undefined)) {
    cols.push({
      header: 'bar',
      numeric: false,
      value: (r) => (r.bar ? `${r.bar.text}${BAR_MARK[`${r.bar.met}`]}` : ''),
    });
  }
  return cols;
}

function extraTable(t: BenchTable): string[] {
  const lines: string[] = [];
  if (t.title) lines.push(`**${cell(t.title)}**`, '');
  lines.push(...table(t.header, t.numeric ?? [], t.rows));
  return lines;
}

/**
 * Peer failures would otherwise only show as "error" cells. One line per peer and message (an out-of-memory
 * error tends to repeat across the largest cases); plain lines, so they do not merge with the notes' list.
 */
function peerErrors(report: BenchReport): string[] {
  const groups = new Map<string, { label: string; error: string; cases: string[] }>();
  for (const p of report.peers) {
    for (const r of report.rows) {
      const v = r.peers[p.name];
      if (!v || !('error' in v)) continue;
      const error = v.error.replace(/\s+/g, ' ').trim();
      const key = JSON.stringify([p.name, error]);
      const g = groups.get(key) ?? { label: p.label, error, cases: [] };
      g.cases.push(r.label);
      groups.set(key, g);
    }
  }
  return [...groups.values()].flatMap((g) => [`${g.label} failed on ${g.cases.join(', ')}: ${g.error}`, '']);
}

/**
 * Renders one suite's report as a Markdown section: heading, machine facts, ceiling, peer status, description,
 * then the main table (columns chosen from what the rows carry), extra tables, notes and chart links. A skipped
 * report renders its reason instead of tables.
 */
export function reportMarkdown(report: BenchReport, options: ReportMarkdownOptions = {}): string {
  const level = Math.min(6, Math.max(1, Math.trunc(options.headingLevel ?? 1)));
  const out: string[] = [`${'#'.repeat(level)} ${report.title}`, ''];
  const facts = [machineLine(report.machine, report.backend)];
  if (isNum(report.seconds)) facts[0] += ` · took ${report.seconds.toFixed(0)} s`;
  const ceiling = ceilingLine(report);
  if (ceiling) facts.push(ceiling);
  for (const p of report.peers) {
    if (!p.available) facts.push(`Peer ${p.label} did not run: ${p.reason ?? 'no reason given'}`);
  }
  const versions = report.peers.filter((p) => p.version).map((p) => `${p.label} (${p.version})`);
  if (versions.length > 0) facts.push(`Peer versions: ${versions.join(', ')}`);
  out.push(...facts.flatMap((f) => [f, '']));
  if (report.description) out.push(report.description, '');

  if (report.status === 'skipped') {
    out.push(`Skipped: ${report.skipReason ?? 'no reason given'}`);
    return finish(out);
  }

  if (report.rows.length === 0) out.push('No rows.', '');
  else {
    const cols = mainColumns(report);
    out.push(
      ...table(
        cols.map((c) => c.header),
        cols.map((c) => c.numeric),
        report.rows.map((r) => cols.map((c) => c.value(r))),
      ),
      '',
    );
    const unit = UNIT_TEXT[report.unit];
    let legend = `Times are medians in ${unit} with the p10–p90 range.`;
    if (report.peers.some((p) => p.available)) {
      legend += ' × peer = peer time / qk time, measured in the same run: above 1 means qk is faster.';
    }
    out.push(legend, '');
    const errors = peerErrors(report);
    if (errors.length > 0) out.push(...errors, '');
  }
  for (const t of report.tables ?? []) out.push(...extraTable(t), '');
  const notes = report.notes ?? [];
  if (notes.length > 0) out.push(...notes.map((n) => `- ${n.replace(/\r?\n|\r/g, ' ')}`), '');
  if (options.chartLinks) {
    for (const c of report.charts) {
      const alt = c.title.replace(/[[\]\\]/g, '\\$&');
      out.push(`![${alt}](${encodeURI(chartFileName(report.suite, c.id))})`, '');
    }
  }
  return finish(out);
}

/** Joins lines without trailing spaces, blank-line runs or a trailing blank line. */
function finish(lines: string[]): string {
  const out: string[] = [];
  for (const l of lines.map((x) => x.trimEnd())) {
    if (l === '' && (out.length === 0 || out[out.length - 1] === '')) continue;
    out.push(l);
  }
  while (out.length > 0 && out[out.length - 1] === '') out.pop();
  return `${out.join('\n')}\n`;
}

/**
 * Renders the whole result directory as one document: title, machine line, a summary table of every suite, then
 * every report's section (with chart links, heading level 2) in the order given.
 */
export function indexMarkdown(index: BenchIndex, reports: BenchReport[]): string {
  const bySuite = new Map(reports.map((r) => [r.suite, r]));
  const summary = index.suites.map((s) => {
    const r = bySuite.get(s.suite);
    return [
      s.suite,
      s.backend,
      s.status,
      r ? String(r.rows.length) : MISSING,
      s.status === 'skipped' ? (s.skipReason ?? '') : '',
    ];
  });
  const head = [
    '# qk benchmark report',
    '',
    machineLine(index.machine),
    '',
    ...table(['suite', 'backend', 'status', 'rows', 'reason'], [false, false, false, true, false], summary),
    '',
  ];
  const sections = reports.map((r) => reportMarkdown(r, { chartLinks: true, headingLevel: 2 }));
  return finish([...head, ...sections.flatMap((s) => [...s.split('\n'), ''])]);
}
