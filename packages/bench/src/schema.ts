/**
 * The result format of every qk benchmark suite: `qk.bench/2`. One {@link BenchReport} per suite run, written as
 * JSON by `qk bench … --report DIR` (and `--json FILE`); Markdown tables and SVG charts are rendered from it alone,
 * so a report can be re-rendered later without the GPU. The format is documented in this package's README;
 * {@link validateReport} checks a parsed document against it.
 *
 * Conventions:
 * - A row's `timing` is its own measurement in the report's `unit` (µs per call for ops, µs per token for decode,
 *   ms for prefill), as median / p10 / p90 / min over samples.
 * - A peer's `time` is in the same unit, measured in the same invocation; `ratio = peer time / qk time`, so a
 *   ratio above 1 means qk is faster.
 * - `pctOfCeiling` is achieved bandwidth over the copy ceiling measured in the same run (`ceiling`).
 */
import type { Summary } from './stats.js';

export const BENCH_SCHEMA = 'qk.bench/2' as const;

/** Where the measured code ran. */
export type BenchBackend = 'cuda' | 'cpu';

/** Facts about the machine and the code that every report carries. */
export interface MachineInfo {
  node: string;
  platform: string;
  cpu: string | null;
  cpuCount: number;
  /** Commit of the code under test (QK_COMMIT / the bundle's commit / `git rev-parse`), or null. */
  commit: string | null;
  /** ISO time the report was made. */
  date: string;
  gpu?: {
    name: string;
    computeCapability: string;
    /** e.g. "13.0" (from cudaDriverGetVersion). */
    driver: string;
    /** e.g. "13.0" (the CUDA runtime the addon was built with). */
    cudaRuntime: string;
    smCount: number;
    memoryBytes: number;
    l2Bytes: number;
  };
}

/** The bandwidth every % of ceiling is measured against, measured in the same run. */
export interface Ceiling {
  /** `device-copy`: a 1 GiB device-to-device copy; `host-copy`: a large host memory copy (CPU runs). */
  kind: 'device-copy' | 'host-copy';
  /** Bytes read + written per second, in GB/s (10^9). */
  gbPerS: number;
  /** How it was measured (e.g. memcpy vs copy-kernel rates). */
  detail?: Record<string, number>;
}

/** A peer implementation measured in the same invocation (PyTorch eager, torch.compile, HF transformers …). */
export interface PeerStatus {
  /** Key used in rows' `peers` (e.g. `torch-eager`, `torch-compile`, `hf-eager`, `hf-static-graph`). */
  name: string;
  /** Human label for tables and chart legends. */
  label: string;
  available: boolean;
  /** Why it did not run (torch missing, no GPU, disabled by a flag …). */
  reason?: string;
  /** e.g. "torch 2.9.0". */
  version?: string;
}

/** One peer measurement of one row. */
export type PeerValue = { time: number; ratio: number } | { error: string };

/** One measured case. */
export interface BenchRow {
  /** Unique within the report. */
  id: string;
  /** What is being measured (kernel, engine or variant): one line per series in charts. */
  series: string;
  /** The case as shown in tables (shape, position, length …). */
  label: string;
  /** The chart's x value (bytes moved, position, prompt length, rows …). */
  x: number;
  /** The case's parameters, machine-readable (dims, dtype, engine …). */
  params: Record<string, number | string | boolean>;
  /** Own measurement in the report's unit. */
  timing: Summary;
  /** Bytes a call (or a token) must move through memory. */
  bytes?: number;
  /** bytes / median time. */
  gbPerS?: number;
  /** 100 · gbPerS / ceiling.gbPerS. */
  pctOfCeiling?: number;
  /** Floating-point operations / median time, in TFLOP/s (compute-bound cases: GEMM, attention). */
  tflopsPerS?: number;
  /** Tokens per second (end-to-end suites). */
  tokPerS?: number;
  /** Keyed by {@link PeerStatus.name}. */
  peers: Record<string, PeerValue>;
  /** A bar from the issues, and whether this run met it (null when it cannot be judged, e.g. a peer missing). */
  bar?: { text: string; met: boolean | null };
  /** Anything else the suite wants to keep (e.g. per-run tok/s). */
  extra?: Record<string, number | string | number[]>;
}

/** A chart drawn from the rows. */
export interface ChartSpec {
  /** File stem: `<suite>-<id>.svg`. */
  id: string;
  title: string;
  /** What is plotted on y: achieved bandwidth (with the ceiling line), tokens/s, or the timing median. */
  y: 'gbPerS' | 'tokPerS' | 'time';
  xLabel: string;
  yLabel: string;
  /** Logarithmic x axis (sizes). */
  logX?: boolean;
  /** Only these series (default: all). */
  series?: string[];
  /** Draw the peers of these names as their own series (derived from `peers[name].time`). */
  peers?: string[];
  /**
   * One peer line per qk series (each series has its own peer measurement at a shared x, e.g. two shapes over the
   * same row sweep); by default a peer is drawn once per x.
   */
  peersPerSeries?: boolean;
}

/** A presentation table a suite builds from its rows (e.g. one row per variant with speedup columns). */
export interface BenchTable {
  title?: string;
  header: string[];
  /** Right-align these columns (numbers). */
  numeric?: boolean[];
  rows: string[][];
}

/** One suite run. */
export interface BenchReport {
  schema: typeof BENCH_SCHEMA;
  suite: string;
  title: string;
  /** What the suite measures, how, and against what: printed above its tables. */
  description: string;
  backend: BenchBackend;
  status: 'ok' | 'skipped';
  /** Why a skipped suite did not run, in one sentence. */
  skipReason?: string;
  machine: MachineInfo;
  ceiling?: Ceiling;
  /** Unit of every `timing` and peer `time`. */
  unit: 'us' | 'ms';
  peers: PeerStatus[];
  rows: BenchRow[];
  charts: ChartSpec[];
  /** Extra presentation tables (rendered after the main table). */
  tables?: BenchTable[];
  notes?: string[];
  /** Cases that failed to run (the suite went on without them); a run with errors exits non-zero. */
  errors?: { id: string; message: string }[];
  /** Seconds the suite took, peers included. */
  seconds?: number;
}

/** What `--report DIR` writes beside the per-suite files: `index.json`. */
export interface BenchIndex {
  schema: typeof BENCH_SCHEMA;
  machine: MachineInfo;
  suites: {
    suite: string;
    title: string;
    backend: BenchBackend;
    status: 'ok' | 'skipped';
    skipReason?: string;
    file: string;
  }[];
}

/** A problem found by {@link validateReport}: where, and what. */
export interface SchemaProblem {
  path: string;
  problem: string;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * Checks a parsed document against `qk.bench/2`. Returns every problem found (empty when valid): wrong or
 * missing fields, non-finite numbers, duplicate row ids, peers named in rows but not declared, charts naming
 * unknown series.
 */
export function validateReport(doc: unknown): SchemaProblem[] {
  const problems: SchemaProblem[] = [];
  const bad = (path: string, problem: string) => problems.push({ path, problem });
  if (!isObject(doc)) return [{ path: '', problem: 'not an object' }];
  if (doc.schema !== BENCH_SCHEMA)
    bad('schema', `expected "${BENCH_SCHEMA}", got ${JSON.stringify(doc.schema)}`);
  for (const key of ['suite', 'title', 'description'] as const) {
    if (typeof doc[key] !== 'string' || doc[key] === '') bad(key, 'a non-empty string is required');
  }
  if (doc.backend !== 'cuda' && doc.backend !== 'cpu') bad('backend', 'must be "cuda" or "cpu"');
  if (doc.status !== 'ok' && doc.status !== 'skipped') bad('status', 'must be "ok" or "skipped"');
  if (doc.status === 'skipped' && (typeof doc.skipReason !== 'string' || doc.skipReason === '')) {
    bad('skipReason', 'a skipped report must say why');
  }
  if (doc.unit !== 'us' && doc.unit !== 'ms') bad('unit', 'must be "us" or "ms"');
  if (!isObject(doc.machine)) bad('machine', 'required');
  else {
    for (const key of ['node', 'platform', 'date'] as const) {
      if (typeof doc.machine[key] !== 'string') bad(`machine.${key}`, 'a string is required');
    }
    if (doc.machine.commit !== null && typeof doc.machine.commit !== 'string') {
      bad('machine.commit', 'a string or null is required');
    }
  }
  if (doc.ceiling !== undefined) {
    if (!isObject(doc.ceiling) || !isFiniteNumber(doc.ceiling.gbPerS) || doc.ceiling.gbPerS <= 0) {
      bad('ceiling.gbPerS', 'a positive number is required');
    }
  }
  const peerNames = new Set<string>();
  if (!Array.isArray(doc.peers)) bad('peers', 'an array is required');
  else {
    doc.peers.forEach((p, i) => {
      if (!isObject(p) || typeof p.name !== 'string' || typeof p.label !== 'string') {
        bad(`peers[${i}]`, 'needs name and label strings');
        return;
      }
      if (typeof p.available !== 'boolean') bad(`peers[${i}].available`, 'a boolean is required');
      if (p.available === false && typeof p.reason !== 'string')
        bad(`peers[${i}].reason`, 'say why it did not run');
      peerNames.add(p.name);
    });
  }
  const series = new Set<string>();
  if (!Array.isArray(doc.rows)) bad('rows', 'an array is required');
  else {
    const ids = new Set<string>();
    doc.rows.forEach((r, i) => {
      const at = `rows[${i}]`;
      if (!isObject(r)) {
        bad(at, 'not an object');
        return;
      }
      if (typeof r.id !== 'string' || r.id === '') bad(`${at}.id`, 'a non-empty string is required');
      else if (ids.has(r.id)) bad(`${at}.id`, `duplicate id "${r.id}"`);
      else ids.add(r.id);
      if (typeof r.series !== 'string') bad(`${at}.series`, 'a string is required');
      else series.add(r.series);
      if (typeof r.label !== 'string') bad(`${at}.label`, 'a string is required');
      if (!isFiniteNumber(r.x)) bad(`${at}.x`, 'a finite number is required');
      if (!isObject(r.params)) bad(`${at}.params`, 'an object is required');
      const t = r.timing;
      if (!isObject(t)) bad(`${at}.timing`, 'required');
      else {
        for (const key of ['median', 'p10', 'p90', 'min'] as const) {
          if (!isFiniteNumber(t[key]) || (t[key] as number) <= 0)
            bad(`${at}.timing.${key}`, 'a positive number is required');
        }
        if (!Number.isInteger(t.samples) || (t.samples as number) < 1)
          bad(`${at}.timing.samples`, 'a positive integer is required');
      }
      for (const key of ['bytes', 'gbPerS', 'pctOfCeiling', 'tflopsPerS', 'tokPerS'] as const) {
        if (r[key] !== undefined && (!isFiniteNumber(r[key]) || (r[key] as number) < 0)) {
          bad(`${at}.${key}`, 'a finite non-negative number is required');
        }
      }
      if (!isObject(r.peers)) bad(`${at}.peers`, 'an object is required');
      else {
        for (const [name, v] of Object.entries(r.peers)) {
          if (!peerNames.has(name)) bad(`${at}.peers.${name}`, "peer not declared in the report's peers");
          if (!isObject(v)) bad(`${at}.peers.${name}`, 'not an object');
          else if (typeof v.error === 'string') continue;
          else if (!isFiniteNumber(v.time) || v.time <= 0 || !isFiniteNumber(v.ratio) || v.ratio <= 0) {
            bad(`${at}.peers.${name}`, 'needs positive finite time and ratio, or an error string');
          }
        }
      }
      if (r.bar !== undefined) {
        if (
          !isObject(r.bar) ||
          typeof r.bar.text !== 'string' ||
          !(r.bar.met === null || typeof r.bar.met === 'boolean')
        ) {
          bad(`${at}.bar`, 'needs text and met (boolean or null)');
        }
      }
    });
  }
  if (!Array.isArray(doc.charts)) bad('charts', 'an array is required');
  else {
    doc.charts.forEach((c, i) => {
      const at = `charts[${i}]`;
      if (!isObject(c) || typeof c.id !== 'string' || typeof c.title !== 'string') {
        bad(at, 'needs id and title strings');
        return;
      }
      if (c.y !== 'gbPerS' && c.y !== 'tokPerS' && c.y !== 'time')
        bad(`${at}.y`, 'must be gbPerS, tokPerS or time');
      if (Array.isArray(c.series)) {
        for (const s of c.series) if (!series.has(s)) bad(`${at}.series`, `no rows of series "${s}"`);
      }
      if (Array.isArray(c.peers)) {
        for (const p of c.peers) if (!peerNames.has(p)) bad(`${at}.peers`, `peer "${p}" not declared`);
      }
    });
  }
  return problems;
}

/** Throws with every problem listed when `doc` is not a valid `qk.bench/2` report. */
export function assertValidReport(doc: unknown): asserts doc is BenchReport {
  const problems = validateReport(doc);
  if (problems.length > 0) {
    const list = problems.map((p) => `  ${p.path || '(root)'}: ${p.problem}`).join('\n');
    throw new Error(`not a valid ${BENCH_SCHEMA} report:\n${list}`);
  }
}
