/** RMSNorm and fused add+RMSNorm cases, and the `rmsnorm` suite (the seed's eight configs). */
import { type FloatDType, fusedAddRmsnorm, rmsnorm, type Tensor } from '@qk/ops';
import type { OpSuite } from '../run-op-suite.js';
import {
  type BarSpec,
  dimsLabel,
  disposeAll,
  emptyTensor,
  type OpCase,
  peerFor,
  randTensor,
  type SuiteContext,
} from './op-case.js';

type F = Tensor<FloatDType>;

export function rmsnormCase(ctx: SuiteContext, b: number, s: number, h: number, bar?: BarSpec): OpCase {
  const rows = b * s;
  const bytes = (2 * rows * h + h) * ctx.elementBytes;
  const id = `rmsnorm-${b}x${s}x${h}`;
  return {
    id,
    series: 'rmsnorm',
    label: dimsLabel([b, s, h]),
    x: bytes,
    params: { batch: b, seq: s, hidden: h, dtype: ctx.dtype },
    bytes,
    ...(bar ? { bar } : {}),
    peer: peerFor(ctx, id, 'rmsnorm', { rows, n: h }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [rows, h], seed),
      randTensor(ctx, [h], seed + 1),
      emptyTensor(ctx, [rows, h]),
    ],
    call: (set) => {
      const [x, w, out] = set as F[];
      rmsnorm(x!, w!, { eps: 1e-6, out: out! });
    },
    dispose: disposeAll,
  };
}

export function fusedAddCase(ctx: SuiteContext, rows: number, h: number, bar?: BarSpec): OpCase {
  const bytes = (4 * rows * h + h) * ctx.elementBytes;
  const id = `fused-add-rmsnorm-${rows}x${h}`;
  return {
    id,
    series: 'fusedAddRmsnorm',
    label: dimsLabel([rows, h]),
    x: bytes,
    params: { rows, hidden: h, dtype: ctx.dtype },
    bytes,
    ...(bar ? { bar } : {}),
    peer: peerFor(ctx, id, 'fused_add_rmsnorm', { rows, n: h }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [rows, h], seed),
      randTensor(ctx, [rows, h], seed + 1),
      randTensor(ctx, [h], seed + 2),
      emptyTensor(ctx, [rows, h]),
      emptyTensor(ctx, [rows, h]),
    ],
    call: (set) => {
      const [x, r, w, out, residualOut] = set as F[];
      fusedAddRmsnorm(x!, r!, w!, { eps: 1e-6, out: out!, residualOut: residualOut! });
    },
    dispose: disposeAll,
  };
}

/** The seed's RMSNorm configs [batch, seq] at hidden 4096. */
const RMSNORM_SEED_CONFIGS: readonly [number, number][] = [
  [1, 128],
  [1, 512],
  [1, 1024],
  [1, 2048],
  [1, 4096],
  [4, 512],
  [8, 256],
  [1, 8192],
];

/** Bars of the cuda-core issue for one seed config. */
function rmsnormBar(b: number, s: number): BarSpec {
  return b === 1 && s === 8192
    ? { text: '≥80% ceiling, beat torch.compile', minPctOfCeiling: 80, beat: ['torch-compile'] }
    : { text: 'beat torch.compile', beat: ['torch-compile'] };
}

export const rmsnormSuite: OpSuite = {
  name: 'rmsnorm',
  title: 'RMSNorm at the seed configs',
  description:
    'RMSNorm (Qwen3RMSNorm semantics: float32 math, one rounding) over [batch×seq×4096] at the seed benchmark’s eight configs, and fused residual-add + RMSNorm. Bytes = input + output + weight.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? [
          ...RMSNORM_SEED_CONFIGS.map(([b, s]) => rmsnormCase(ctx, b, s, 4096, rmsnormBar(b, s))),
          ...[512, 2048, 8192].map((rows) =>
            fusedAddCase(
              ctx,
              rows,
              4096,
              rows === 8192 ? { text: '≥80% ceiling', minPctOfCeiling: 80 } : undefined,
            ),
          ),
        ]
      : [
          ...[
            [1, 16],
            [1, 64],
            [4, 16],
          ].map(([b, s]) => rmsnormCase(ctx, b!, s!, 512)),
          fusedAddCase(ctx, 32, 512),
        ],
  charts: [
    {
      id: 'bandwidth',
      title: 'RMSNorm: achieved bandwidth vs bytes moved',
      y: 'gbPerS',
      xLabel: 'bytes moved per call',
      yLabel: 'GB/s',
      logX: true,
      peers: ['torch-eager', 'torch-compile'],
      series: ['rmsnorm'],
    },
  ],
};
