#!/usr/bin/env node
// CPU benchmark of the @qk/ops reference ops at tiny-model and single-row decode shapes. The references define
// correctness; this keeps their cost visible (a tiny Qwen3 forward must stay a CI-seconds affair). Timing:
// monotonic clock, warm-up, then the median / p10 / p90 of repeated runs over rotating input sets. Writes
// bench-results/reference-ops.json. CPU only: the GPU suites live with @qk/cuda-core and @qk/bench.
import { mkdirSync, writeFileSync } from 'node:fs';
import { arch, cpus, platform } from 'node:os';
import {
  attention,
  fusedAddRmsnorm,
  linear,
  linearInt4,
  linearInt8,
  quantizeInt4,
  quantizeInt8,
  rmsnorm,
  rope,
  sample,
  swiglu,
  Tensor,
} from '@qk/ops';

const quick = process.argv.includes('--quick');
const ROTATIONS = 3;
const dtype = 'bf16'; // default for inputs; each row reports its own
let seed = 1;
const rand = (shape, t = dtype) => Tensor.randn(shape, { dtype: t, seed: seed++ });

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** Times `run(inputs)` over rotating input sets; `bytes` and `flops` describe one call. */
function bench(name, shape, makeInputs, run, { bytes = 0, flops = 0 } = {}) {
  const sets = Array.from({ length: ROTATIONS }, makeInputs);
  for (const s of sets) run(s); // warm-up: JIT and caches
  const samples = [];
  const deadline = performance.now() + (quick ? 150 : 600);
  for (let i = 0; samples.length < 5 || (performance.now() < deadline && samples.length < 200); i++) {
    const s = sets[i % ROTATIONS];
    const t0 = performance.now();
    run(s);
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  const median = percentile(samples, 0.5);
  return {
    name,
    shape,
    dtype: sets[0][0].dtype,
    runs: samples.length,
    medianMs: median,
    p10Ms: percentile(samples, 0.1),
    p90Ms: percentile(samples, 0.9),
    gbPerS: bytes ? bytes / (median * 1e6) : null,
    gflopPerS: flops ? flops / (median * 1e6) : null,
  };
}

const H = 1024; // Qwen3-0.6B hidden size
const results = [
  bench(
    'rmsnorm',
    [8, H],
    () => [rand([8, H]), rand([H])],
    ([x, w]) => rmsnorm(x, w),
    { bytes: 2 * 8 * H * 2 },
  ),
  bench(
    'fusedAddRmsnorm',
    [8, H],
    () => [rand([8, H]), rand([8, H]), rand([H])],
    ([x, r, w]) => fusedAddRmsnorm(x, r, w),
    {
      bytes: 4 * 8 * H * 2,
    },
  ),
  bench(
    'rope',
    [8, 16, 128],
    () => [rand([8, 16, 128])],
    ([x]) => rope(x, { positions: [0, 1, 2, 3, 4, 5, 6, 7] }),
    {
      bytes: 2 * 8 * 16 * 128 * 2,
    },
  ),
  bench(
    'swiglu',
    [8, 3072],
    () => [rand([8, 3072]), rand([8, 3072])],
    ([g, u]) => swiglu(g, u),
    { bytes: 3 * 8 * 3072 * 2 },
  ),
  bench(
    'linear (decode row)',
    [1, H, 2048],
    () => [rand([1, H]), rand([2048, H])],
    ([x, w]) => linear(x, w),
    {
      bytes: 2048 * H * 2,
      flops: 2 * 2048 * H,
    },
  ),
  bench(
    'linear (tiny prefill)',
    [32, 256, 768],
    () => [rand([32, 256]), rand([768, 256])],
    ([x, w]) => linear(x, w),
    {
      flops: 2 * 32 * 256 * 768,
    },
  ),
  bench(
    'linearInt8 (decode row)',
    [1, H, 2048],
    () => [rand([1, H]), quantizeInt8(rand([2048, H]))],
    ([x, w]) => linearInt8(x, w),
    {
      bytes: 2048 * H,
      flops: 2 * 2048 * H,
    },
  ),
  bench(
    'linearInt4 (decode row)',
    [1, H, 2048],
    () => [rand([1, H]), quantizeInt4(rand([2048, H]))],
    ([x, w]) => linearInt4(x, w),
    {
      bytes: (2048 * H) / 2,
      flops: 2 * 2048 * H,
    },
  ),
  bench(
    'attention (decode, 512 cached)',
    [1, 16, 8, 128, 512],
    () => [rand([1, 16, 128]), rand([512, 8, 128]), rand([512, 8, 128])],
    ([q, k, v]) => attention(q, k, v),
    { bytes: 2 * 512 * 8 * 128 * 2, flops: 4 * 16 * 512 * 128 },
  ),
  bench(
    'sample (top-k 50, top-p 0.9)',
    [1, 151936],
    () => [rand([1, 151936], 'f32')],
    ([l]) => sample(l, { topK: 50, topP: 0.9, seed: 3 }),
  ),
];

const fmt = (v, digits) => (v === null ? '—' : v.toFixed(digits));
console.log(
  `@qk/ops reference ops on the CPU (${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version})`,
);
console.log('| op | shape | dtype | median ms | p10 ms | p90 ms | GB/s | GFLOP/s |');
console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |');
for (const r of results) {
  console.log(
    `| ${r.name} | [${r.shape.join('×')}] | ${r.dtype} | ${r.medianMs.toFixed(3)} | ${r.p10Ms.toFixed(3)} | ${r.p90Ms.toFixed(3)} | ${fmt(r.gbPerS, 3)} | ${fmt(r.gflopPerS, 3)} |`,
  );
}
mkdirSync('bench-results', { recursive: true });
const report = {
  schema: 'qk.bench.reference-ops/1',
  date: new Date().toISOString(),
  machine: {
    cpu: cpus()[0]?.model ?? null,
    cores: cpus().length,
    platform: platform(),
    arch: arch(),
    node: process.version,
  },
  timer: 'performance.now (monotonic)',
  rotations: ROTATIONS,
  results,
};
writeFileSync('bench-results/reference-ops.json', `${JSON.stringify(report, null, 2)}\n`);
console.log('\nwrote bench-results/reference-ops.json');
