/** Every op suite by name, and the `ops` composite (the cuda-core issue's bars in one table). */
import type { OpSuite } from '../run-op-suite.js';
import { attentionSuite, decodeAttentionCases } from './attention.js';
import { ropeCase, ropeSuite, swigluCase, swigluSuite } from './elementwise.js';
import {
  gemvCase,
  linearActSuite,
  normLinearSuite,
  QWEN3_LINEAR_SHAPES,
  quantSuite,
  smallMSuite,
} from './linear.js';
import { fusedAddCase, rmsnormCase, rmsnormSuite } from './norm.js';

export const gemvSuite: OpSuite = {
  name: 'gemv',
  title: 'Decode GEMV on Qwen3 layer shapes',
  description:
    'linear of one token row (batch-1 decode) on every projection of Qwen3-0.6B and Qwen3-8B, LM head included. Bytes = weight + input + output. Peers: F.linear (cuBLAS), eager and compiled.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? Object.entries(QWEN3_LINEAR_SHAPES).flatMap(([model, shapes]) =>
          shapes.map(([layer, n, k]) => gemvCase(ctx, model, layer, n, k)),
        )
      : [gemvCase(ctx, 'tiny', 'qkv', 512, 256), gemvCase(ctx, 'tiny', 'down', 256, 1024)],
  charts: [
    {
      id: 'bandwidth',
      title: 'Decode GEMV: achieved bandwidth vs weight bytes',
      y: 'gbPerS',
      xLabel: 'weight bytes',
      yLabel: 'GB/s',
      logX: true,
    },
  ],
};

/** The kernel table of the cuda-core issue: each op's seed sizes with its bar. */
export const opsSuite: OpSuite = {
  name: 'ops',
  title: 'Kernel bars of @qk/cuda-core',
  description:
    'The cuda-core issue’s bars in one table: RMSNorm at the seed’s eight configs, fused add+RMSNorm, RoPE, SwiGLU, decode GEMV on Qwen3 shapes and decode attention, each against the copy ceiling and PyTorch measured in the same run.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? [
          ...rmsnormSuite.cases(ctx),
          ...ropeSuite.cases(ctx),
          ...swigluSuite.cases(ctx),
          ...gemvSuite.cases(ctx),
          ...decodeAttentionCases(ctx),
        ]
      : [
          rmsnormCase(ctx, 1, 16, 512),
          fusedAddCase(ctx, 16, 512),
          ropeCase(ctx, 16, 8, 128),
          swigluCase(ctx, 8, 512),
          ...gemvSuite.cases(ctx),
          ...decodeAttentionCases(ctx),
        ],
  charts: [
    {
      id: 'bandwidth',
      title: 'qk kernels: achieved bandwidth vs bytes moved',
      y: 'gbPerS',
      xLabel: 'bytes moved per call',
      yLabel: 'GB/s',
      logX: true,
      series: ['rmsnorm', 'fusedAddRmsnorm', 'swiglu'],
    },
  ],
};

/** The op suites `qk bench all` runs, in order (`ops` is a composite of their cases and not repeated). */
export const OP_SUITES: readonly OpSuite[] = [
  rmsnormSuite,
  ropeSuite,
  swigluSuite,
  gemvSuite,
  normLinearSuite,
  attentionSuite,
  linearActSuite,
  quantSuite,
  smallMSuite,
];

/** Every op suite by name, `ops` included. */
export const OP_SUITES_BY_NAME: ReadonlyMap<string, OpSuite> = new Map(
  [...OP_SUITES, opsSuite].map((s) => [s.name, s]),
);
