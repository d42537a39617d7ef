/** The `ops` suite end to end: ceiling, qk rows, PyTorch peers, ratios, JSON report. */
import { cudaEmptyCache, cudaStatus } from '@qk/ops';
import { gpuInfo, measureCopyCeiling } from './harness.js';
import { hostInfo } from './machine.js';
import { type PeerRun, runTorchPeers } from './peers/torch.js';
import { type OpRow, opsCases, runOpCase } from './suites/ops.js';

export interface OpsBenchOptions {
  /** Only cases whose id contains this. */
  filter?: string;
  /** Run the PyTorch peers (default true; skipped with a reason when torch is unavailable). */
  peers?: boolean;
  onProgress?: (line: string) => void;
}

export interface OpsBenchReport {
  schema: 'qk.bench/1';
  suite: 'ops';
  status: 'ok' | 'skipped';
  skipReason?: string;
  host: ReturnType<typeof hostInfo>;
  gpu?: ReturnType<typeof gpuInfo>;
  ceilingGbPerS?: number;
  ceiling?: { memcpyGbPerS: number; kernelGbPerS: number };
  peers?: { available: boolean; reason?: string; torch?: string };
  rows: OpRow[];
}

export function runOpsBench(options: OpsBenchOptions = {}): OpsBenchReport {
  const host = hostInfo();
  const status = cudaStatus();
  if (!status.available) {
    return {
      schema: 'qk.bench/1',
      suite: 'ops',
      status: 'skipped',
      skipReason: status.reason ?? 'no GPU',
      host,
      rows: [],
    };
  }
  const gpu = gpuInfo();
  const log = options.onProgress ?? (() => {});
  const ceiling = measureCopyCeiling();
  log(
    `copy ceiling ${ceiling.gbPerS.toFixed(0)} GB/s on ${gpu.gpu} (cudaMemcpyAsync ${ceiling.memcpyGbPerS.toFixed(0)}, copy kernel ${ceiling.kernelGbPerS.toFixed(0)})`,
  );
  const cases = opsCases(gpu.l2Bytes).filter((c) => !options.filter || c.id.includes(options.filter));
  const rows: OpRow[] = [];
  for (const c of cases) {
    const row = runOpCase(c, ceiling.gbPerS, gpu.l2Bytes);
    rows.push(row);
    log(
      `${row.id}: ${row.timing.median.toFixed(2)} µs, ${row.gbPerS.toFixed(0)} GB/s (${row.pctOfCeiling.toFixed(1)}% of ceiling)`,
    );
  }
  let peers: PeerRun = { available: false, reason: 'disabled (--no-peers)', results: {} };
  if (options.peers !== false) {
    cudaEmptyCache();
    peers = runTorchPeers(
      cases.map((c) => c.peer),
      (line) => log(`torch ${line}`),
    );
  }
  for (const row of rows) {
    const p = peers.results[row.id];
    if (p?.eagerUs !== undefined) {
      row.torchEagerUs = p.eagerUs;
      row.vsEager = p.eagerUs / row.timing.median;
    }
    if (p?.compileUs !== undefined) {
      row.torchCompileUs = p.compileUs;
      row.vsCompile = p.compileUs / row.timing.median;
    }
  }
  return {
    schema: 'qk.bench/1',
    suite: 'ops',
    status: 'ok',
    host,
    gpu,
    ceilingGbPerS: ceiling.gbPerS,
    ceiling: { memcpyGbPerS: ceiling.memcpyGbPerS, kernelGbPerS: ceiling.kernelGbPerS },
    peers: {
      available: peers.available,
      ...(peers.reason ? { reason: peers.reason } : {}),
      ...(peers.torch ? { torch: peers.torch } : {}),
    },
    rows,
  };
}
