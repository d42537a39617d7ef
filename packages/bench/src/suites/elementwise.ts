/** RoPE and SwiGLU cases and suites (the seed's sequence and FFN sweeps). */
import { type FloatDType, rope, swiglu, Tensor } from '@qk/ops';
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

export function ropeCase(ctx: SuiteContext, seq: number, heads: number, dim: number, bar?: BarSpec): OpCase {
  const bytes = 2 * seq * heads * dim * ctx.elementBytes;
  const id = `rope-${seq}x${heads}x${dim}`;
  return {
    id,
    series: 'rope',
    label: dimsLabel([seq, heads, dim]),
    x: seq,
    params: { seq, heads, dim, theta: 1e6, dtype: ctx.dtype },
    bytes,
    ...(bar ? { bar } : {}),
    peer: peerFor(ctx, id, 'rope', { seq, heads, dim }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [seq, heads, dim], seed),
      Tensor.arange(0, seq, { dtype: 'i32' }).to(ctx.device),
      emptyTensor(ctx, [seq, heads, dim]),
    ],
    call: (set) => {
      const [x, positions, out] = set as [F, Tensor<'i32'>, F];
      rope(x, { positions, theta: 1e6, out });
    },
    dispose: disposeAll,
  };
}

export function swigluCase(ctx: SuiteContext, rows: number, ffn: number, bar?: BarSpec): OpCase {
  const bytes = 3 * rows * ffn * ctx.elementBytes;
  const id = `swiglu-${rows}x${ffn}`;
  return {
    id,
    series: 'swiglu',
    label: dimsLabel([rows, ffn]),
    x: ffn,
    params: { rows, ffn, dtype: ctx.dtype },
    bytes,
    ...(bar ? { bar } : {}),
    peer: peerFor(ctx, id, 'swiglu', { rows, ffn }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [rows, ffn], seed),
      randTensor(ctx, [rows, ffn], seed + 1),
      emptyTensor(ctx, [rows, ffn]),
    ],
    call: (set) => {
      const [g, u, out] = set as F[];
      swiglu(g!, u!, { out: out! });
    },
    dispose: disposeAll,
  };
}

const CEILING_80: BarSpec = { text: '≥80% ceiling', minPctOfCeiling: 80 };

const ROPE_SEQS = [512, 1024, 2048, 4096, 8192] as const;
const SWIGLU_FFNS = [4096, 11008, 14336, 18944] as const;

export const ropeSuite: OpSuite = {
  name: 'rope',
  title: 'RoPE sequence sweep',
  description:
    'Rotary position embedding (rotate-half, θ = 10⁶) of [seq×32×128] with per-token positions, seq 512–8192. Bytes = input + output.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? ROPE_SEQS.map((seq) => ropeCase(ctx, seq, 32, 128, seq === 8192 ? CEILING_80 : undefined))
      : [8, 32, 64].map((seq) => ropeCase(ctx, seq, 8, 128)),
  charts: [
    {
      id: 'bandwidth',
      title: 'RoPE: achieved bandwidth vs sequence length',
      y: 'gbPerS',
      xLabel: 'sequence length',
      yLabel: 'GB/s',
      logX: true,
      peers: ['torch-eager', 'torch-compile'],
    },
  ],
};

export const swigluSuite: OpSuite = {
  name: 'swiglu',
  title: 'SwiGLU FFN sweep',
  description:
    'SwiGLU silu(gate) · up on [batch 4 × seq 512 = 2048 rows × ffn], ffn 4096–18944 (Qwen/Llama FFN widths). Bytes = gate + up + output.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? SWIGLU_FFNS.map((ffn) => swigluCase(ctx, 2048, ffn, ffn === 18944 ? CEILING_80 : undefined))
      : [256, 1024, 3072].map((ffn) => swigluCase(ctx, 8, ffn)),
  charts: [
    {
      id: 'bandwidth',
      title: 'SwiGLU: achieved bandwidth vs FFN width',
      y: 'gbPerS',
      xLabel: 'ffn width',
      yLabel: 'GB/s',
      peers: ['torch-eager', 'torch-compile'],
    },
  ],
};
