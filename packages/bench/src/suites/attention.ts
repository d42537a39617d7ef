/** Attention cases and the `attention` suite: batched and causal prefill (flash-style) and split-KV decode. */
import { attention, type FloatDType, Tensor } from '@qk/ops';
import type { OpSuite } from '../run-op-suite.js';
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

/** Self-attention of `seq` tokens over themselves: q [batch, seq, qHeads, dim], k/v with kvHeads. */
export function prefillAttentionCase(
  ctx: SuiteContext,
  batch: number,
  qHeads: number,
  kvHeads: number,
  seq: number,
  dim: number,
  causal: boolean,
): OpCase {
  const e = ctx.elementBytes;
  const bytes = batch * seq * dim * (2 * qHeads + 2 * kvHeads) * e;
  const flops = (causal ? 2 : 4) * batch * qHeads * seq * seq * dim;
  const series = `${causal ? 'causal' : 'full'} B${batch} H${qHeads}${kvHeads !== qHeads ? `/kv${kvHeads}` : ''} D${dim}`;
  const id = `attention-${causal ? 'causal' : 'full'}-b${batch}-h${qHeads}-kv${kvHeads}-s${seq}-d${dim}`;
  return {
    id,
    series,
    label: `${series} seq ${seq}`,
    x: seq,
    params: { batch, qHeads, kvHeads, seq, dim, causal, dtype: ctx.dtype },
    bytes,
    flops,
    peer: peerFor(
      ctx,
      id,
      'attention_prefill',
      { batch, qHeads, kvHeads, seq, dim, causal: causal ? 1 : 0 },
      bytes,
    ),
    makeSet: (seed) => [
      randTensor(ctx, [batch, seq, qHeads, dim], seed),
      randTensor(ctx, [batch, seq, kvHeads, dim], seed + 1),
      randTensor(ctx, [batch, seq, kvHeads, dim], seed + 2),
      emptyTensor(ctx, [batch, seq, qHeads, dim]),
    ],
    call: (set) => {
      const [q, k, v, out] = set as F[];
      attention(q!, k!, v!, { out: out!, causal });
    },
    dispose: disposeAll,
  };
}

/** One query token against a KV cache of `kvLen` entries (GQA), the decode kernel. */
export function decodeAttentionCase(
  ctx: SuiteContext,
  model: string,
  qHeads: number,
  kvHeads: number,
  kvLen: number,
  bar?: BarSpec,
): OpCase {
  const dim = 128;
  const bytes = 2 * kvLen * kvHeads * dim * ctx.elementBytes;
  const id = `attention-decode-${model}-${kvLen}`;
  return {
    id,
    series: `decode ${model} q${qHeads}/kv${kvHeads}`,
    label: `${model} q${qHeads}/kv${kvHeads}×${dim} ctx ${kvLen}`,
    x: kvLen,
    params: { model, qHeads, kvHeads, dim, kvLen, dtype: ctx.dtype },
    bytes,
    flops: 4 * qHeads * kvLen * dim,
    ...(bar ? { bar } : {}),
    peer: peerFor(ctx, id, 'attention_decode', { qHeads, kvHeads, dim, kvLen }, bytes),
    makeSet: (seed) => [
      randTensor(ctx, [1, qHeads, dim], seed),
      randTensor(ctx, [kvLen, kvHeads, dim], seed + 1),
      randTensor(ctx, [kvLen, kvHeads, dim], seed + 2),
      emptyTensor(ctx, [1, qHeads, dim]),
      // Persistent split-KV scratch (a graph capture must not allocate per call); far above what 16k needs.
      Tensor.empty([ctx.backend === 'cuda' ? 16 * 2 ** 20 : 1], 'u8', ctx.device),
    ],
    call: (set) => {
      const [q, k, v, out, ws] = set as [F, F, F, F, Tensor<'u8'>];
      attention(q, k, v, { out, workspace: ws });
    },
    dispose: disposeAll,
  };
}

/** The decode-attention cases of the cuda-core issue (0.6B and 8B head layouts, 512–16k keys). */
export function decodeAttentionCases(ctx: SuiteContext): OpCase[] {
  const lens = ctx.backend === 'cuda' ? [512, 2048, 8192, 16384] : [64, 256];
  const bar = (len: number): BarSpec | undefined =>
    ctx.backend === 'cuda' && len === 8192 ? { text: '≥70% ceiling', minPctOfCeiling: 70 } : undefined;
  return lens.flatMap((len) => [
    decodeAttentionCase(ctx, '0.6b', 16, 8, len, bar(len)),
    decodeAttentionCase(ctx, '8b', 32, 8, len, bar(len)),
  ]);
}

export const attentionSuite: OpSuite = {
  name: 'attention',
  title: 'Attention: prefill and decode',
  description:
    'Scaled dot-product attention. Prefill (flash-style kernel): batch 16 × 32 heads × seq 512 × dim 64 without a mask (the seed’s fused-attention config), and causal 32 heads × dim 128 over seq 512–4096 (Qwen3-8B with its 8 KV heads beside MHA); TFLOP/s counts the unmasked half only for causal. Decode (split-KV kernel): one query against 512–16k cached keys, bytes = the K and V read. Peers: F.scaled_dot_product_attention (flash / efficient backends), eager and compiled.',
  cases: (ctx) =>
    ctx.backend === 'cuda'
      ? [
          prefillAttentionCase(ctx, 16, 32, 32, 512, 64, false),
          ...[512, 1024, 2048, 4096].flatMap((seq) => [
            prefillAttentionCase(ctx, 1, 32, 32, seq, 128, true),
            prefillAttentionCase(ctx, 1, 32, 8, seq, 128, true),
          ]),
          ...decodeAttentionCases(ctx),
        ]
      : [
          prefillAttentionCase(ctx, 2, 4, 4, 32, 64, false),
          prefillAttentionCase(ctx, 1, 4, 2, 64, 64, true),
          ...decodeAttentionCases(ctx),
        ],
  charts: [
    {
      id: 'prefill',
      title: 'Causal prefill attention: time per call vs sequence length (32 heads, dim 128)',
      y: 'time',
      xLabel: 'sequence length',
      yLabel: 'µs per call',
      logX: true,
      series: ['causal B1 H32 D128', 'causal B1 H32/kv8 D128', 'causal B1 H4/kv2 D64'],
    },
    {
      id: 'decode',
      title: 'Decode attention: achieved bandwidth vs cached keys',
      y: 'gbPerS',
      xLabel: 'cached keys',
      yLabel: 'GB/s',
      logX: true,
      series: ['decode 0.6b q16/kv8', 'decode 8b q32/kv8'],
      peers: ['torch-compile'],
      peersPerSeries: true,
    },
  ],
};
