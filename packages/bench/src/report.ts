/** Markdown rendering of suite results. Every number says what it is measured against. */
import type { OpRow } from './suites/ops.js';

const f = (v: number | undefined, digits: number) =>
  v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits);

export function opsTable(rows: readonly OpRow[], ceilingGbPerS: number): string {
  const lines = [
    `Copy ceiling measured in this run: ${ceilingGbPerS.toFixed(0)} GB/s (device-to-device, bytes read + written). Times are per call, median of graph-replay samples; ratios > 1 mean qk is faster.`,
    '',
    '| op | shape | qk µs | p10–p90 µs | GB/s | % ceiling | torch eager µs | torch.compile µs | × eager | × compile | bar |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.group} | ${r.shape} | ${f(r.timing.median, 2)} | ${f(r.timing.p10, 2)}–${f(r.timing.p90, 2)} | ${f(r.gbPerS, 0)} | ${f(r.pctOfCeiling, 1)}% | ${f(r.torchEagerUs, 2)} | ${f(r.torchCompileUs, 2)} | ${f(r.vsEager, 2)} | ${f(r.vsCompile, 2)} | ${r.bar ?? ''} |`,
    );
  }
  return lines.join('\n');
}
