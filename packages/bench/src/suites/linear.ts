/**
 * Linear-layer cases and suites: decode GEMV on Qwen3 shapes, fused RMSNorm + linear over a row sweep, linear with
 * an activation epilogue, and weight-only INT8 / INT4 against bf16.
 */
import {
  type Activation,
  DEFAULT_INT4_GROUP,
  type FloatDType,
  type Int4Weight,
  type Int8Weight,
  linear,
  linearInt4,
  linearInt8,
  quantizeInt4,
  quantizeInt8,
  rmsnormLinear,
  type Tensor,
} from '@qk/ops';
import type { OpSuite } from '../run-op-suite.js';
import type { BenchRow, BenchTable } from '../schema.js';
import {
  type BarSpec,
  disposeAll,
  emptyTensor,
  type OpCase,
  peerFor,
  randTensor,
  type SuiteContext,
} from './op-case.js';

type F = Tensor<FloatDType>;

/** Qwen3 decode GEMV shapes: [layer, N, K]. */
export const QWEN3_LINEAR_SHAPES: Record<'0.6b' | '8b', [string, number, number][]> = {
  '0.6b': [
    ['qkv', (16 + 8 + 8) * 128, 1024],
    ['o', 1024, 16 * 128],
    ['gate_up', 2 * 3072, 1024],
    ['down', 1024, 3072],
    ['lm_head', 151936, 1024],
  ],
  '8b': [
    ['qkv', (32 + 8 + 8) * 128, 4096],
    ['o', 4096, 32 * 128],
    ['gate_up', 2 * 12288, 4096],
    ['down', 4096, 12288],
    ['lm_head', 151936, 4096],
  ],
};

/** `linear` of one token row: the decode GEMV. */
export function gemvCase(ctx: SuiteContext, model: string, layer: string, n: number, k: number): OpCase {
  const e = ctx.elementBytes;
  const bytes = (n * k + k + n) * e;
  const id = `gemv-${model}-${layer}`;
  const bar: BarSpec =
    n * k * 2 >= 16 * 2 ** 20
      ? { text: '≥85% ceiling, beat F.linear', minPctOfCeiling: 85, beat: ['torch-eager'] }
      : { text: 'beat F.linear', beat: ['torch-eager'] };
  return {
    id,
    series: `gemv ${model}`,
    label: `${model} ${layer} N=${n} K=${k}`,
    x: n * k * e,
    params: { model, layer, m: 1, n, k, dtype: ctx.dtype },
    bytes,
    flops: 2 * n * k,
    ...(ctx.backend === 'cuda' ? { bar } : {}),
    peer: peerFor(ctx, id, 'linear', { m: 1, n, k }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [1, k], seed),
      randTensor(ctx, [n, k], seed + 1, 0.02),
      emptyTensor(ctx, [1, n]),
    ],
    call: (set) => {
      const [x, w, out] = set as F[];
      linear(x!, w!, { out: out! });
    },
    dispose: disposeAll,
  };
}

/** RMSNorm then a linear layer (gate/up with SwiGLU when `ffn` is set) over `m` rows. */
export function normLinearCase(ctx: SuiteContext, m: number, k: number, n: number, glu: boolean): OpCase {
  const e = ctx.elementBytes;
  const outCols = glu ? n / 2 : n;
  const bytes = (n * k + m * k + k + m * outCols) * e;
  const series = glu ? `gate/up+SwiGLU N=${n / 2}×2 K=${k}` : `N=${n} K=${k}`;
  const id = `norm-linear-${glu ? 'glu-' : ''}${n}x${k}-m${m}`;
  return {
    id,
    series,
    label: `M=${m} ${series}`,
    x: m,
    params: { m, n, k, glu, dtype: ctx.dtype },
    bytes,
    flops: 2 * m * n * k,
    peer: peerFor(ctx, id, 'rmsnorm_linear', { rows: m, k, n, glu: glu ? 1 : 0 }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [m, k], seed),
      randTensor(ctx, [k], seed + 1),
      randTensor(ctx, [n, k], seed + 2, 0.02),
      emptyTensor(ctx, [m, outCols]),
    ],
    call: (set) => {
      const [x, nw, w, out] = set as F[];
      rmsnormLinear(x!, nw!, w!, { out: out!, ...(glu ? { glu: 'swiglu' as const } : {}) });
    },
    dispose: disposeAll,
  };
}

const ACT_CODE: Record<Exclude<Activation, 'none'>, number> = { silu: 1, gelu: 2, gelu_tanh: 3 };

/** `linear` with a fused activation epilogue (or none, the baseline). */
export function linearActCase(
  ctx: SuiteContext,
  m: number,
  k: number,
  n: number,
  activation: Activation,
): OpCase {
  const e = ctx.elementBytes;
  const bytes = (n * k + m * k + m * n) * e;
  const id = `linear-${activation}-${m}x${n}x${k}`;
  const dims = { m, n, k };
  return {
    id,
    series: `linear+${activation}`,
    label: `M=${m} N=${n} K=${k} ${activation}`,
    x: n,
    params: { m, n, k, activation, dtype: ctx.dtype },
    bytes,
    flops: 2 * m * n * k,
    peer:
      activation === 'none'
        ? peerFor(ctx, id, 'linear', dims, bytes)
        : peerFor(ctx, id, 'linear_act', { ...dims, act: ACT_CODE[activation] }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [m, k], seed),
      randTensor(ctx, [n, k], seed + 1, 0.02),
      emptyTensor(ctx, [m, n]),
    ],
    call: (set) => {
      const [x, w, out] = set as F[];
      linear(x!, w!, { out: out!, activation });
    },
    dispose: disposeAll,
  };
}

export type WeightFormat = 'bf16' | 'int8' | 'int4';

/** A weight-only quantized (or bf16) linear over `m` rows of a [n, k] weight. */
export function quantLinearCase(
  ctx: SuiteContext,
  label: string,
  m: number,
  n: number,
  k: number,
  format: WeightFormat,
): OpCase {
  const e = ctx.elementBytes;
  const group = DEFAULT_INT4_GROUP;
  const weightBytes =
    format === 'int8' ? n * k + 4 * n : format === 'int4' ? (n * k) / 2 + (4 * n * k) / group : n * k * e;
  const bytes = weightBytes + (m * k + m * n) * e;
  const id = `quant-${format}-${label}-m${m}`;
  const dims = { m, n, k };
  type QSet = { x: F; out: F; w?: F; q8?: Int8Weight; q4?: Int4Weight };
  return {
    id,
    series: `${format} M=${m}`,
    label: `${label} N=${n} K=${k} M=${m}`,
    x: n * k,
    params: { m, n, k, format, ...(format === 'int4' ? { group } : {}), dtype: ctx.dtype },
    bytes,
    flops: 2 * m * n * k,
    peer:
      format === 'bf16'
        ? peerFor(ctx, id, 'linear', dims, bytes)
        : format === 'int8'
          ? peerFor(ctx, id, 'linear_int8', dims, bytes)
          : peerFor(ctx, id, 'linear_int4', { ...dims, group }, bytes),
    makeSet: (seed): QSet => {
      const x = randTensor(ctx, [m, k], seed);
      const out = emptyTensor(ctx, [m, n]);
      const w = randTensor(ctx, [n, k], seed + 1, 0.02);
      if (format === 'bf16') return { x, out, w };
      try {
        return format === 'int8'
          ? { x, out, q8: quantizeInt8(w) }
          : { x, out, q4: quantizeInt4(w, { groupSize: group }) };
      } finally {
        w.dispose();
      }
    },
    call: (set) => {
      const s = set as QSet;
      if (s.q8) linearInt8(s.x, s.q8, { out: s.out });
      else if (s.q4) linearInt4(s.x, s.q4, { out: s.out });
      else linear(s.x, s.w!, { out: s.out });
    },
    dispose: (set) => {
      const s = set as QSet;
      for (const t of [s.x, s.out, s.w, s.q8?.qweight, s.q8?.scales, s.q4?.qweight, s.q4?.scales])
        t?.dispose();
    },
  };
}

const NORM_LINEAR_MS = [1, 4, 16, 64, 256, 1024, 2048] as const;

export const normLinearSuite: OpSuite = {
  name: 'norm-linear',
  title: 'Fused RMSNorm + linear, row sweep',
  description:
    'RMSNorm followed by a bias-free linear layer, M = 1–2048 rows: K = N = 3584 (Qwen2.5-7B-sized square projection) and a gate/up projection with SwiGLU to ffn 18944. Up to 64 rows run one fused kernel; more rows run the norm, our tensor-core GEMM and SwiGLU. Peers: HF RMSNorm then F.linear (and SiLU·up), eager and compiled.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? [
          ...NORM_LINEAR_MS.map((m) => normLinearCase(ctx, m, 3584, 3584, false)),
          ...NORM_LINEAR_MS.map((m) => normLinearCase(ctx, m, 3584, 2 * 18944, true)),
        ]
      : [1, 4, 16].flatMap((m) => [
          normLinearCase(ctx, m, 256, 256, false),
          normLinearCase(ctx, m, 256, 1024, true),
        ]),
  charts: [
    {
      id: 'latency',
      title: 'RMSNorm + linear: time per call vs rows',
      y: 'time',
      xLabel: 'rows (M)',
      yLabel: 'µs per call',
      logX: true,
      peers: ['torch-compile'],
      peersPerSeries: true,
    },
  ],
};

export const linearActSuite: OpSuite = {
  name: 'linear-act',
  title: 'Linear with a fused activation',
  description:
    'linear(x, W) with a SiLU / GELU (erf) / GELU (tanh) epilogue at batch 128, hidden 4096, N = 4096 and 14336, beside the plain linear. Peers: F.linear then the activation (two kernels in eager; torch.compile may fuse).',
  cases: (ctx) => {
    const acts: Activation[] = ['none', 'silu', 'gelu', 'gelu_tanh'];
    return ctx.backend === 'cuda'
      ? [4096, 14336].flatMap((n) => acts.map((a) => linearActCase(ctx, 128, 4096, n, a)))
      : acts.map((a) => linearActCase(ctx, 4, 256, 256, a));
  },
  charts: [
    {
      id: 'throughput',
      title: 'Linear + activation: time per call vs N (batch 128, K 4096)',
      y: 'time',
      xLabel: 'out features (N)',
      yLabel: 'µs per call',
    },
  ],
};

/** One row per (shape, M): the bf16 time and the speedup of INT8 and INT4 over it, with the compiled peers. */
function quantSpeedups(rows: readonly BenchRow[]): BenchTable[] {
  const byKey = new Map<string, Partial<Record<WeightFormat, BenchRow>>>();
  for (const r of rows) {
    const key = `${r.params.n}x${r.params.k}-m${r.params.m}`;
    const entry = byKey.get(key) ?? {};
    entry[r.params.format as WeightFormat] = r;
    byKey.set(key, entry);
  }
  const us = (r: BenchRow | undefined) => (r ? r.timing.median.toFixed(2) : '—');
  const x = (a: BenchRow | undefined, b: BenchRow | undefined) =>
    a && b ? `${(a.timing.median / b.timing.median).toFixed(2)}×` : '—';
  const peer = (r: BenchRow | undefined) => {
    const p = r?.peers['torch-compile'];
    return p && 'time' in p ? p.time.toFixed(2) : '—';
  };
  const out: string[][] = [];
  for (const f of byKey.values()) {
    const any = f.bf16 ?? f.int8 ?? f.int4;
    if (!any) continue;
    out.push([
      any.label.replace(/ M=\d+$/, ''),
      String(any.params.m),
      us(f.bf16),
      us(f.int8),
      x(f.bf16, f.int8),
      us(f.int4),
      x(f.bf16, f.int4),
      peer(f.bf16),
      peer(f.int8),
      peer(f.int4),
    ]);
  }
  return [
    {
      title: 'Weight-only INT8 / INT4 against bf16 (µs per call; × = bf16 time / quantized time)',
      header: [
        'shape',
        'M',
        'bf16 µs',
        'int8 µs',
        'int8 × bf16',
        'int4 µs',
        'int4 × bf16',
        'torch.compile bf16 µs',
        'torch.compile int8 µs',
        'torch.compile int4 µs',
      ],
      numeric: [false, true, true, true, true, true, true, true, true, true],
      rows: out,
    },
  ];
}

export const quantSuite: OpSuite = {
  name: 'quant',
  title: 'INT8 / INT4 weight-only linear vs bf16',
  description:
    'Weight-only quantized linear layers (INT8 per output channel; INT4 in groups of 128 along K, two codes per byte) against the bf16 linear, on the Qwen3-8B decode projections at M = 1 (GEMV) and M = 16. Bytes count the packed weight and its scales. Peers: F.linear in bf16, and the dequantize-then-F.linear formulation of INT8/INT4 in eager PyTorch and under torch.compile.',
  cases: (ctx) => {
    const formats: WeightFormat[] = ['bf16', 'int8', 'int4'];
    if (ctx.backend !== 'cuda') return formats.map((f) => quantLinearCase(ctx, 'small', 1, 256, 512, f));
    const shapes = QWEN3_LINEAR_SHAPES['8b'].filter(([layer]) => layer !== 'lm_head');
    return [1, 16].flatMap((m) =>
      shapes.flatMap(([layer, n, k]) => formats.map((f) => quantLinearCase(ctx, `8b ${layer}`, m, n, k, f))),
    );
  },
  charts: [
    {
      id: 'latency',
      title: 'Weight-only quantized linear: time per call vs weight elements (Qwen3-8B projections)',
      y: 'time',
      xLabel: 'weight elements (N·K)',
      yLabel: 'µs per call',
      logX: true,
    },
  ],
  tables: quantSpeedups,
};

/** Rows of the small-M sweep: chunked decode, several tokens verified at once, small batches. */
const SMALL_M_ROWS = [2, 4, 8, 16, 24, 32, 48, 64] as const;

/**
 * Per M, our time and torch's summed over every projection measured, and their ratio (the bar: ≥ 1.0× at
 * every M from 2 to 64); per projection, the ratio and the share of the copy ceiling.
 */
function smallMSums(rows: readonly BenchRow[]): BenchTable[] {
  const torch = (r: BenchRow) => {
    const p = r.peers['torch-eager'];
    return p && 'time' in p ? p.time : undefined;
  };
  const byM = new Map<number, { ours: number; theirs: number; all: boolean }>();
  for (const r of rows) {
    const m = Number(r.params.m);
    const sum = byM.get(m) ?? { ours: 0, theirs: 0, all: true };
    const t = torch(r);
    sum.ours += r.timing.median;
    if (t === undefined) sum.all = false;
    else sum.theirs += t;
    byM.set(m, sum);
  }
  const sums = [...byM.entries()]
    .sort(([a], [b]) => a - b)
    .map(([m, s]) => [
      String(m),
      s.ours.toFixed(1),
      s.all ? s.theirs.toFixed(1) : '—',
      s.all ? `${(s.theirs / s.ours).toFixed(2)}×` : '—',
    ]);
  const each = rows.map((r) => {
    const t = torch(r);
    return [
      r.label.replace(/ M=\d+$/, ''),
      String(r.params.m),
      r.timing.median.toFixed(2),
      t === undefined ? '—' : t.toFixed(2),
      t === undefined ? '—' : `${(t / r.timing.median).toFixed(2)}×`,
      r.pctOfCeiling === undefined ? '—' : `${r.pctOfCeiling.toFixed(0)}%`,
    ];
  });
  return [
    {
      title: 'Sums over the projections per M (µs per call; × = torch time / ours, ≥ 1 is faster)',
      header: ['M', 'qk µs', 'torch µs', 'torch / qk'],
      numeric: [true, true, true, true],
      rows: sums,
    },
    {
      title: 'Per projection',
      header: ['projection', 'M', 'qk µs', 'torch µs', 'torch / qk', '% of copy ceiling'],
      numeric: [false, true, true, true, true, true],
      rows: each,
    },
  ];
}

export const smallMSuite: OpSuite = {
  name: 'small-m',
  title: 'Small-M linear (2–64 rows) on the Qwen3 projections',
  description:
    'bf16 linear of 2–64 token rows on every Qwen3-0.6B and Qwen3-8B projection (LM head left out): chunked decode, verifying several tokens, small batches. The weight dominates the bytes, so the copy ceiling is the bound. Peer: F.linear (cuBLAS) in the same run; the table sums each M over the projections.',
  cases: (ctx) => {
    if (ctx.backend !== 'cuda')
      return [2, 16].map((m) => quantLinearCase(ctx, 'tiny qkv', m, 512, 256, 'bf16'));
    return SMALL_M_ROWS.flatMap((m) =>
      Object.entries(QWEN3_LINEAR_SHAPES).flatMap(([model, shapes]) =>
        shapes
          .filter(([layer]) => layer !== 'lm_head')
          .map(([layer, n, k]) => quantLinearCase(ctx, `${model} ${layer}`, m, n, k, 'bf16')),
      ),
    );
  },
  charts: [
    {
      id: 'latency',
      title: 'Small-M linear: time per call vs weight elements',
      y: 'time',
      xLabel: 'weight elements (N·K)',
      yLabel: 'µs per call',
      logX: true,
    },
  ],
  tables: smallMSums,
};
