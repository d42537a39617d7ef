/**
 * Verify cases of the attention family: the split-KV decode kernel (one query token) at the context lengths the
 * chunking must survive (1 key up to 8k, odd lengths cutting tiles and chunks) with Qwen3-0.6B (16 q / 8 kv heads)
 * and Qwen3-8B (32 / 8) heads, odd head dims and plain multi-head attention; the prefill kernel causal (qLen =
 * kvLen), chunked (positionOffset > 0), non-causal, at odd head dims up to 256, and batched.
 */
import type { FloatDType } from '../../dtype.js';
import { attention } from '../../ops/attention.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { QWEN3_SHAPES, VERIFY_DTYPES } from './shapes.js';

interface AttentionShape {
  batch?: number;
  qLen: number;
  kvLen: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  /** Default: kvLen − qLen (the queries are the newest cache entries). */
  positionOffset?: number;
  causal?: boolean;
}

function describe(s: AttentionShape): string {
  const parts = [
    s.batch === undefined ? '' : `B=${s.batch} `,
    `q=${s.qLen} kv=${s.kvLen} h=${s.qHeads}/${s.kvHeads} d=${s.headDim}`,
    s.positionOffset === undefined ? '' : ` off=${s.positionOffset}`,
    s.causal === false ? ' full' : '',
  ];
  return parts.join('');
}

function attentionCase(dtype: FloatDType, s: AttentionShape, tag: VerifyCase['tag']): VerifyCase {
  const lead = s.batch === undefined ? [] : [s.batch];
  const options = {
    ...(s.positionOffset === undefined ? {} : { positionOffset: s.positionOffset }),
    ...(s.causal === undefined ? {} : { causal: s.causal }),
  };
  return {
    op: s.qLen === 1 ? 'attentionDecode' : 'attentionPrefill',
    dtype,
    shape: describe(s),
    tag,
    tolerance: toleranceFor('attention', dtype),
    make(seed) {
      // Uniform K and V (cheap to draw at 8k keys), normal queries: scores spread over a few units.
      const q = Tensor.randn([...lead, s.qLen, s.qHeads, s.headDim], { dtype, seed });
      const kvShape = [...lead, s.kvLen, s.kvHeads, s.headDim];
      const k = Tensor.rand(kvShape, { dtype, seed: seed + 1, low: -1.5, high: 1.5 });
      const v = Tensor.rand(kvShape, { dtype, seed: seed + 2, low: -1.5, high: 1.5 });
      return {
        inputs: [q, k, v],
        expected: [attention(q, k, v, options)],
        run: ([gq, gk, gv], [out]) =>
          void attention(gq as Tensor<FloatDType>, gk as Tensor<FloatDType>, gv as Tensor<FloatDType>, {
            ...options,
            out,
          }),
      };
    },
  };
}

/**
 * Decode with the key count read from device memory (how a captured decode graph runs): a cache of `capacity`
 * rows of which the first `length` are live; the rows past them hold garbage the kernel must not read.
 */
function attentionAtLengthCase(
  dtype: FloatDType,
  capacity: number,
  length: number,
  heads: { qHeads: number; kvHeads: number; headDim: number },
  tag: VerifyCase['tag'],
): VerifyCase {
  const { qHeads, kvHeads, headDim } = heads;
  return {
    op: 'attentionDecode',
    dtype,
    shape: `q=1 len=${length} of cap=${capacity} h=${qHeads}/${kvHeads} d=${headDim} kvLength:cuda`,
    tag,
    tolerance: toleranceFor('attention', dtype),
    make(seed) {
      const q = Tensor.randn([1, qHeads, headDim], { dtype, seed });
      const kvShape = [capacity, kvHeads, headDim];
      const k = Tensor.rand(kvShape, { dtype, seed: seed + 1, low: -1.5, high: 1.5 });
      const v = Tensor.rand(kvShape, { dtype, seed: seed + 2, low: -1.5, high: 1.5 });
      // Poison the dead rows: a kernel that reads past `length` produces NaN.
      if (length < capacity) {
        const poison = Tensor.full([capacity - length, kvHeads, headDim], Number.NaN, dtype);
        k.data.set(poison.data as never, length * kvHeads * headDim);
        v.data.set(poison.data as never, length * kvHeads * headDim);
      }
      const kvLength = Tensor.fromArray([length], { dtype: 'i32' });
      return {
        inputs: [q, k, v, kvLength],
        expected: [attention(q, k.slice(0, length), v.slice(0, length), { causal: false })],
        run: ([gq, gk, gv, gl], [out]) =>
          void attention(gq as Tensor<FloatDType>, gk as Tensor<FloatDType>, gv as Tensor<FloatDType>, {
            kvLength: gl as Tensor<'i32'>,
            out,
          }),
      };
    },
  };
}

/** Context lengths of the decode sweep: one key, sizes that cut tiles and chunks oddly, and 8k. */
const DECODE_KV_LENS = [1, 7, 111, 989, 4097, 8192] as const;

export const ATTENTION_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  // Decode (split-KV), Qwen3 head layouts.
  ...QWEN3_SHAPES.flatMap((m) =>
    DECODE_KV_LENS.map((kvLen) =>
      attentionCase(
        dtype,
        { qLen: 1, kvLen, qHeads: m.heads, kvHeads: m.kvHeads, headDim: m.headDim },
        m.tag,
      ),
    ),
  ),
  // Decode with a device-side key count over an 8k cache (fast path) and an odd head dim (generic path).
  ...QWEN3_SHAPES.flatMap((m) =>
    [1, 100, 4097, 8192].map((length) =>
      attentionAtLengthCase(
        dtype,
        8192,
        length,
        { qHeads: m.heads, kvHeads: m.kvHeads, headDim: m.headDim },
        m.tag,
      ),
    ),
  ),
  attentionAtLengthCase(dtype, 989, 500, { qHeads: 4, kvHeads: 2, headDim: 7 }, 'odd'),
  // Decode: odd head dims (generic kernel), plain multi-head, a GQA group of 5, a head dim of 64 and 256.
  attentionCase(dtype, { qLen: 1, kvLen: 989, qHeads: 4, kvHeads: 2, headDim: 7 }, 'odd'),
  attentionCase(dtype, { qLen: 1, kvLen: 989, qHeads: 4, kvHeads: 4, headDim: 111 }, 'odd'),
  attentionCase(dtype, { qLen: 1, kvLen: 989, qHeads: 4, kvHeads: 4, headDim: 128 }, 'odd'),
  attentionCase(dtype, { qLen: 1, kvLen: 777, qHeads: 10, kvHeads: 2, headDim: 64 }, 'odd'),
  attentionCase(dtype, { qLen: 1, kvLen: 300, qHeads: 4, kvHeads: 2, headDim: 256 }, 'odd'),
  // Decode at a position inside the cache (a causal prefix), non-causal, and batched.
  attentionCase(
    dtype,
    { qLen: 1, kvLen: 300, qHeads: 16, kvHeads: 8, headDim: 128, positionOffset: 150 },
    'edge',
  ),
  attentionCase(dtype, { qLen: 1, kvLen: 300, qHeads: 16, kvHeads: 8, headDim: 128, causal: false }, 'edge'),
  attentionCase(dtype, { batch: 2, qLen: 1, kvLen: 100, qHeads: 16, kvHeads: 8, headDim: 128 }, 'edge'),
  // Prefill: causal over a fresh cache (qLen = kvLen), Qwen3-0.6B heads.
  ...[17, 333].map((n) =>
    attentionCase(dtype, { qLen: n, kvLen: n, qHeads: 16, kvHeads: 8, headDim: 128 }, 'qwen3-0.6b'),
  ),
  attentionCase(dtype, { qLen: 17, kvLen: 17, qHeads: 32, kvHeads: 8, headDim: 128 }, 'qwen3-8b'),
  // Chunked prefill (queries in the middle of the cache), non-causal, odd head dims, batched.
  attentionCase(
    dtype,
    { qLen: 64, kvLen: 300, qHeads: 4, kvHeads: 2, headDim: 128, positionOffset: 100 },
    'edge',
  ),
  attentionCase(dtype, { qLen: 50, kvLen: 300, qHeads: 4, kvHeads: 2, headDim: 128 }, 'edge'),
  attentionCase(dtype, { qLen: 17, kvLen: 50, qHeads: 4, kvHeads: 2, headDim: 128, causal: false }, 'edge'),
  attentionCase(dtype, { qLen: 33, kvLen: 40, qHeads: 3, kvHeads: 3, headDim: 7, positionOffset: 5 }, 'odd'),
  attentionCase(
    dtype,
    { qLen: 33, kvLen: 40, qHeads: 4, kvHeads: 1, headDim: 111, positionOffset: 7 },
    'odd',
  ),
  attentionCase(
    dtype,
    { qLen: 20, kvLen: 70, qHeads: 2, kvHeads: 1, headDim: 256, positionOffset: 50 },
    'odd',
  ),
  attentionCase(dtype, { batch: 2, qLen: 5, kvLen: 9, qHeads: 4, kvHeads: 2, headDim: 128 }, 'edge'),
  // The tensor-core prefill kernels: every GQA ratio they pack into a tile (1, 2, 4, 8, and 3, which does not
  // divide the tile), query and key counts that cut tiles, chunks in the middle of the cache, and every head dim
  // they are built for.
  ...[1, 2, 3, 4, 8].map((ratio) =>
    attentionCase(dtype, { qLen: 213, kvLen: 213, qHeads: 2 * ratio, kvHeads: 2, headDim: 128 }, 'odd'),
  ),
  attentionCase(
    dtype,
    { qLen: 131, kvLen: 517, qHeads: 8, kvHeads: 1, headDim: 128, positionOffset: 386 },
    'edge',
  ),
  attentionCase(dtype, { qLen: 129, kvLen: 300, qHeads: 4, kvHeads: 2, headDim: 128, causal: false }, 'edge'),
  ...[64, 256].map((headDim) =>
    attentionCase(
      dtype,
      { qLen: 150, kvLen: 277, qHeads: 8, kvHeads: 2, headDim, positionOffset: 127 },
      'odd',
    ),
  ),
]);
