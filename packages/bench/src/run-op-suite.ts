/**
 * Runs an op suite on one backend: the copy ceiling, every case over rotating input sets (CUDA-event graph timing on
 * the GPU, the monotonic clock on the CPU), the PyTorch peers for the same cases in the same invocation, ratios and
 * bars → one `qk.bench/2` report.
 */
import { cudaEmptyCache, cudaStatus } from '@qk/ops';
import { measureCopyCeiling, measureHostCopyCeiling, timeCpu, timeGpu } from './harness.js';
import { machineInfo } from './machine.js';
import { type PeerRun, runTorchPeers } from './peers/torch.js';
import {
  BENCH_SCHEMA,
  type BenchBackend,
  type BenchReport,
  type BenchRow,
  type BenchTable,
  type Ceiling,
  type ChartSpec,
  type MachineInfo,
  type PeerStatus,
} from './schema.js';
import {
  type BarSpec,
  type OpCase,
  rotationsFor,
  type SuiteContext,
  suiteContext,
} from './suites/op-case.js';

/** A named op suite: its cases on each backend, its charts and any presentation tables. */
export interface OpSuite {
  name: string;
  title: string;
  /** What is measured and against what (the report's description). */
  description: string;
  /** The cases for a backend: the seed's sizes on the GPU, small ones for the CPU references. */
  cases(ctx: SuiteContext): OpCase[];
  charts: ChartSpec[];
  /** Extra tables built from the finished rows (e.g. speedups between series). */
  tables?(rows: readonly BenchRow[]): BenchTable[];
}

export interface SuiteRunOptions {
  /** Default: `cuda` when a GPU is usable, else `cpu`. */
  backend?: BenchBackend;
  /** Only cases whose id contains this. */
  filter?: string;
  /** Run the PyTorch peers (default true; GPU runs only). */
  peers?: boolean;
  /** Measure torch.compile too (default true). */
  compilePeers?: boolean;
  onProgress?: (line: string) => void;
  /** Reuse facts and the ceiling measured once for several suites of one invocation. */
  machine?: MachineInfo;
  ceiling?: Ceiling;
}

export const TORCH_PEERS: readonly Omit<PeerStatus, 'available'>[] = [
  { name: 'torch-eager', label: 'PyTorch eager' },
  { name: 'torch-compile', label: 'torch.compile' },
];

/** The backend a run uses when none is asked for. */
export function defaultBackend(): BenchBackend {
  return cudaStatus().available ? 'cuda' : 'cpu';
}

/** The copy ceiling of a backend, measured now. */
export function measureCeiling(backend: BenchBackend): Ceiling {
  if (backend === 'cpu') return { kind: 'host-copy', gbPerS: measureHostCopyCeiling().gbPerS };
  const c = measureCopyCeiling();
  return {
    kind: 'device-copy',
    gbPerS: c.gbPerS,
    detail: { memcpyGbPerS: c.memcpyGbPerS, kernelGbPerS: c.kernelGbPerS },
  };
}

/** A report that says why the suite did not run. */
export function skippedReport(
  base: Pick<BenchReport, 'suite' | 'title' | 'description' | 'unit'>,
  backend: BenchBackend,
  reason: string,
  machine: MachineInfo = machineInfo(),
): BenchReport {
  return {
    schema: BENCH_SCHEMA,
    ...base,
    backend,
    status: 'skipped',
    skipReason: reason,
    machine,
    peers: [],
    rows: [],
    charts: [],
  };
}

/** Whether a row meets its bar: every condition checked, null when a peer it names is missing. */
export function judgeBar(bar: BarSpec, row: BenchRow): boolean | null {
  let met: boolean | null = true;
  if (bar.minPctOfCeiling !== undefined) {
    if (row.pctOfCeiling === undefined) met = null;
    else if (row.pctOfCeiling < bar.minPctOfCeiling) return false;
  }
  for (const peer of bar.beat ?? []) {
    const p = row.peers[peer];
    if (p === undefined || 'error' in p) met = null;
    else if (p.ratio <= 1) return false;
  }
  return met;
}

/** Runs one case: builds its rotating input sets, times it, frees the sets. */
export function measureCase(c: OpCase, ctx: SuiteContext, ceiling: Ceiling | undefined): BenchRow {
  const rotations = rotationsFor(c.bytes, ctx.l2Bytes);
  const sets = Array.from({ length: rotations }, (_, i) => c.makeSet(1000 + i * 17));
  try {
    const timing = ctx.backend === 'cuda' ? timeGpu(sets, (s) => c.call(s)) : timeCpu(sets, (s) => c.call(s));
    const gbPerS = c.bytes / (timing.median * 1e3);
    return {
      id: c.id,
      series: c.series,
      label: c.label,
      x: c.x,
      params: c.params,
      timing,
      bytes: c.bytes,
      gbPerS,
      ...(ceiling ? { pctOfCeiling: (100 * gbPerS) / ceiling.gbPerS } : {}),
      ...(c.flops !== undefined ? { tflopsPerS: c.flops / (timing.median * 1e6) } : {}),
      peers: {},
    };
  } finally {
    for (const s of sets) c.dispose(s);
  }
}

/** Runs `suite` on a backend and returns its report (skipped, with the reason, when the backend is unusable). */
export function runOpSuite(suite: OpSuite, options: SuiteRunOptions = {}): BenchReport {
  const started = performance.now();
  const backend = options.backend ?? defaultBackend();
  const base = { suite: suite.name, title: suite.title, description: suite.description, unit: 'us' as const };
  const log = options.onProgress ?? (() => {});
  if (backend === 'cuda') {
    const status = cudaStatus();
    if (!status.available)
      return skippedReport(base, backend, status.reason ?? 'no usable CUDA device', options.machine);
  }
  const machine = options.machine ?? machineInfo();
  const ctx = suiteContext(backend, machine.gpu?.l2Bytes ?? 0);
  const ceiling = options.ceiling ?? measureCeiling(backend);
  const cases = suite.cases(ctx).filter((c) => !options.filter || c.id.includes(options.filter));
  const rows: BenchRow[] = [];
  const measured: OpCase[] = [];
  const errors: { id: string; message: string }[] = [];
  for (const c of cases) {
    let row: BenchRow;
    try {
      row = measureCase(c, ctx, ceiling);
    } catch (e) {
      // One broken case must not cost the rest of a long GPU run; it is reported, and the CLI exits non-zero.
      const message = e instanceof Error ? e.message : String(e);
      errors.push({ id: c.id, message });
      log(`${suite.name} ${c.id}: FAILED: ${message}`);
      continue;
    }
    rows.push(row);
    measured.push(c);
    log(
      `${suite.name} ${row.id}: ${row.timing.median.toFixed(2)} µs, ${row.gbPerS?.toFixed(0)} GB/s (${row.pctOfCeiling?.toFixed(1)}% of ceiling)${row.tflopsPerS !== undefined ? `, ${row.tflopsPerS.toFixed(1)} TFLOP/s` : ''}`,
    );
  }
  let peers: PeerRun;
  const specs = measured.flatMap((c) => (c.peer ? [c.peer] : []));
  if (backend !== 'cuda')
    peers = { available: false, reason: 'the PyTorch peers run on the GPU only', results: {} };
  else if (options.peers === false)
    peers = { available: false, reason: 'disabled (--no-peers)', results: {} };
  else if (specs.length === 0) peers = { available: false, reason: 'no peer for these cases', results: {} };
  else {
    cudaEmptyCache();
    peers = runTorchPeers(specs, {
      compile: options.compilePeers !== false,
      onProgress: (line) => log(`torch ${line}`),
    });
  }
  const compileSkipped = options.compilePeers === false;
  const peerStatus: PeerStatus[] = TORCH_PEERS.map((p) => {
    const off = p.name === 'torch-compile' && compileSkipped;
    const available = peers.available && !off;
    return {
      ...p,
      available,
      ...(available ? {} : { reason: off ? 'disabled (--no-compile)' : (peers.reason ?? 'unavailable') }),
      ...(peers.torch ? { version: `torch ${peers.torch}` } : {}),
    };
  });
  for (const [row, c] of rows.map((r, i) => [r, measured[i]!] as const)) {
    const result = peers.results[c.peer?.id ?? ''];
    if (result) {
      const put = (name: string, us: number | undefined, error: string | undefined) => {
        if (us !== undefined && us > 0) row.peers[name] = { time: us, ratio: us / row.timing.median };
        else if (error !== undefined) row.peers[name] = { error };
      };
      put('torch-eager', result.eagerUs, result.eagerError);
      if (!compileSkipped) put('torch-compile', result.compileUs, result.compileError);
    }
    if (c.bar) row.bar = { text: c.bar.text, met: judgeBar(c.bar, row) };
  }
  const tables = suite.tables?.(rows) ?? [];
  return {
    schema: BENCH_SCHEMA,
    ...base,
    backend,
    status: 'ok',
    machine,
    ceiling,
    peers: peerStatus,
    rows,
    charts: chartsFor(suite.charts, rows),
    ...(tables.length > 0 ? { tables } : {}),
    ...(errors.length > 0 ? { errors } : {}),
    notes: [
      ...errors.map((e) => `case ${e.id} FAILED: ${e.message}`),
      ...(backend === 'cpu'
        ? [
            'CPU run: the plain-TypeScript reference ops (float32) at small sizes; the GPU sizes need a CUDA device.',
          ]
        : []),
    ],
    seconds: (performance.now() - started) / 1000,
  };
}

/** The charts that have rows to draw, each narrowed to the series present (a filter can drop some). */
export function chartsFor(charts: readonly ChartSpec[], rows: readonly BenchRow[]): ChartSpec[] {
  const present = new Set(rows.map((r) => r.series));
  return charts.flatMap((chart) => {
    if (!chart.series) return present.size > 0 ? [chart] : [];
    const series = chart.series.filter((s) => present.has(s));
    return series.length > 0 ? [{ ...chart, series }] : [];
  });
}
