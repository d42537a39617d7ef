import {
  checkDtype,
  checkFloat,
  checkNonNegativeInt,
  checkPositive,
  checkSameDtype,
  commonDevice,
} from '../check.js';
import { cudaAttention, cudaAttentionWorkspaceBytes } from '../cuda/attention.js';
import type { FloatDType } from '../dtype.js';
import { QkShapeError, QkValueError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { formatShape } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Options of {@link attention}. */
export interface AttentionOptions {
  /**
   * Absolute position of the first query token; query t sits at `positionOffset + t`. Default
   * `kvLen − qLen`: the queries are the newest entries of the cache (prefill of a fresh cache, or a decode step).
   */
  positionOffset?: number;
  /** Mask keys after each query's position (default `true`). When false every query sees all `kvLen` keys. */
  causal?: boolean;
  /** Scale of the scores. Default `1/√headDim`. */
  scale?: number;
  /** Write the result here (same shape, dtype and device as `q`) instead of a new tensor. */
  out?: Tensor;
  /**
   * CUDA only (ignored on the CPU): scratch of the decode kernel (one query token), a CUDA `u8` tensor of at least
   * `attentionDecodeWorkspaceBytes(qHeads, headDim, visible keys)` bytes. By default each call allocates and frees
   * one through the caching allocator; CUDA-graph captures must pass a persistent one sized for their longest
   * context instead (the size never decreases with the context length).
   */
  workspace?: Tensor<'u8'>;
  /**
   * The number of valid keys, read when the op runs from this one-element `i32` tensor on the device of `q`
   * (instead of `kvLen`, which then is the capacity of `k` and `v`). One query token only (`qLen` 1, no batch axis);
   * the query sits at position `kvLength − 1` and sees keys `0 … kvLength − 1`. This is what lets one captured CUDA
   * graph serve every step of a decode: the step writes the new length into the tensor before each replay.
   */
  kvLength?: Tensor<'i32'>;
}

/**
 * Scaled dot-product attention of a block of queries against a KV cache, with grouped-query heads (GQA).
 *
 * Shapes (an optional leading batch axis `B` applies to all three):
 * `q` `[qLen, qHeads, headDim]`, `k` `[kvLen, kvHeads, headDim]`, `v` `[kvLen, kvHeads, headDim]`,
 * `qHeads` a multiple of `kvHeads`; query head `h` reads KV head `⌊h / (qHeads / kvHeads)⌋` (HF `repeat_kv`).
 *
 * For query t at position `p = positionOffset + t`: `s_j = scale · q_t · k_j` for keys `j ≤ p` (all j when not
 * causal), `y_t = Σ_j softmax(s)_j · v_j`. Returns `q`'s shape and dtype; float64 math, one rounding.
 *
 * On CUDA (all three tensors on `'cuda'`, head dim ≤ 256): one query token per sequence takes the split-KV decode
 * kernel, longer query blocks the flash-style prefill kernel; both compute in float32 with one rounding.
 */
export function attention<D extends FloatDType>(
  q: Tensor<D>,
  k: Tensor<NoInfer<D>>,
  v: Tensor<NoInfer<D>>,
  options: AttentionOptions = {},
): Tensor<D> {
  const op = 'attention';
  checkFloat(op, 'q', q);
  checkFloat(op, 'k', k);
  checkFloat(op, 'v', v);
  checkSameDtype(op, 'k', k, q, 'q');
  checkSameDtype(op, 'v', v, q, 'q');
  if (q.rank !== 3 && q.rank !== 4) {
    throw new QkShapeError({
      op,
      arg: 'q',
      expected: '[qLen, qHeads, headDim] or [batch, qLen, qHeads, headDim]',
      got: formatShape(q.shape),
    });
  }
  const batched = q.rank === 4;
  const batch = batched ? q.shape[0]! : 1;
  const [qLen, qHeads, headDim] = q.shape.slice(batched ? 1 : 0) as [number, number, number];
  for (const [arg, t] of [
    ['k', k],
    ['v', v],
  ] as const) {
    if (t.rank !== q.rank || (batched && t.shape[0] !== batch) || t.shape[t.rank - 1] !== headDim) {
      const lead = batched ? `${batch}, ` : '';
      throw new QkShapeError({
        op,
        arg,
        expected: `[${lead}kvLen, kvHeads, ${headDim}] (matching q)`,
        got: formatShape(t.shape),
      });
    }
  }
  const [kvLen, kvHeads] = k.shape.slice(batched ? 1 : 0) as [number, number];
  if (v.shape[v.rank - 3] !== kvLen || v.shape[v.rank - 2] !== kvHeads) {
    throw new QkShapeError({
      op,
      arg: 'v',
      expected: `the shape of k ${formatShape(k.shape)}`,
      got: formatShape(v.shape),
    });
  }
  if (kvHeads === 0 || qHeads % kvHeads !== 0) {
    throw new QkShapeError({
      op,
      arg: 'k',
      expected: `a KV head count dividing qHeads (${qHeads})`,
      got: `${kvHeads} heads`,
    });
  }
  if (kvLen === 0) {
    throw new QkShapeError({ op, arg: 'k', expected: 'at least one cached key', got: formatShape(k.shape) });
  }
  if (options.kvLength !== undefined) return attentionAtLength(q, k, v, options.kvLength, options);
  const causal = options.causal ?? true;
  const offset = checkNonNegativeInt(op, 'positionOffset', options.positionOffset ?? kvLen - qLen);
  if (causal && offset + qLen > kvLen) {
    throw new QkValueError(
      op,
      'positionOffset',
      `(${offset}) + qLen (${qLen}) exceeds the ${kvLen} cached keys: a causal query needs its own key in the cache.`,
    );
  }
  const scale = checkPositive(op, 'scale', options.scale ?? 1 / Math.sqrt(headDim));
  if (commonDevice(op, { q, k, v }) === 'cuda') {
    const params = { batch, qLen, kvLen, qHeads, kvHeads, headDim, positionOffset: offset, causal, scale };
    return cudaAttention(q, k as Tensor<D>, v as Tensor<D>, params, options.out, options.workspace);
  }
  const group = qHeads / kvHeads;
  const qs = readFloats(q);
  const ks = readFloats(k);
  const vs = readFloats(v);
  const out = new Float32Array(q.size);
  const scores = new Float64Array(kvLen);
  const acc = new Float64Array(headDim);
  for (let b = 0; b < batch; b++) {
    const qBatch = b * qLen * qHeads * headDim;
    const kvBatch = b * kvLen * kvHeads * headDim;
    for (let t = 0; t < qLen; t++) {
      const visible = causal ? offset + t + 1 : kvLen;
      for (let h = 0; h < qHeads; h++) {
        const qBase = qBatch + (t * qHeads + h) * headDim;
        const kvHead = Math.floor(h / group);
        let max = -Infinity;
        for (let j = 0; j < visible; j++) {
          const kBase = kvBatch + (j * kvHeads + kvHead) * headDim;
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += qs[qBase + d]! * ks[kBase + d]!;
          const s = dot * scale;
          scores[j] = s;
          if (s > max) max = s;
        }
        let sum = 0;
        acc.fill(0);
        for (let j = 0; j < visible; j++) {
          const p = Math.exp(scores[j]! - max);
          sum += p;
          const vBase = kvBatch + (j * kvHeads + kvHead) * headDim;
          for (let d = 0; d < headDim; d++) acc[d] = acc[d]! + p * vs[vBase + d]!;
        }
        for (let d = 0; d < headDim; d++) out[qBase + d] = acc[d]! / sum;
      }
    }
  }
  return writeCpuOutput(op, fromFloats(out, q.shape, q.dtype), options.out);
}

/** {@link attention} with a run-time key count (`options.kvLength`); shapes were checked by the caller. */
function attentionAtLength<D extends FloatDType>(
  q: Tensor<D>,
  k: Tensor<D>,
  v: Tensor<D>,
  kvLength: Tensor<'i32'>,
  options: AttentionOptions,
): Tensor<D> {
  const op = 'attention';
  checkDtype(op, 'kvLength', kvLength, ['i32'] as const);
  if (kvLength.size !== 1) {
    throw new QkShapeError({
      op,
      arg: 'kvLength',
      expected: 'one element',
      got: formatShape(kvLength.shape),
    });
  }
  if (q.rank !== 3 || q.shape[0] !== 1) {
    throw new QkShapeError({
      op,
      arg: 'q',
      expected: '[1, qHeads, headDim]: kvLength serves one query token',
      got: formatShape(q.shape),
    });
  }
  const [, qHeads, headDim] = q.shape as [number, number, number];
  const [capacity, kvHeads] = k.shape as [number, number];
  const scale = checkPositive(op, 'scale', options.scale ?? 1 / Math.sqrt(headDim));
  if (commonDevice(op, { q, k, v, kvLength }) === 'cuda') {
    const params = {
      batch: 1,
      qLen: 1,
      kvLen: capacity,
      qHeads,
      kvHeads,
      headDim,
      positionOffset: 0,
      causal: false,
      scale,
    };
    return cudaAttention(q, k, v, params, options.out, options.workspace, kvLength);
  }
  const n = kvLength.item();
  if (!Number.isInteger(n) || n < 1 || n > capacity) {
    throw new QkValueError(
      op,
      'kvLength',
      `holds ${n}; it must lie in [1, ${capacity}] (the rows of k and v).`,
    );
  }
  const { kvLength: _, ...rest } = options;
  return attention(q, k.slice(0, n), v.slice(0, n), { ...rest, causal: false });
}

/**
 * A persistent scratch tensor for {@link attention}'s CUDA decode path (`options.workspace`), large enough for
 * `qHeads` query heads of `headDim` over any context of up to `maxKeys` keys. Needed by CUDA-graph captures, which
 * must not allocate per call; dispose it with the graph.
 */
export function attentionWorkspace(qHeads: number, headDim: number, maxKeys: number): Tensor<'u8'> {
  const op = 'attentionWorkspace';
  for (const [arg, v] of [
    ['qHeads', qHeads],
    ['headDim', headDim],
    ['maxKeys', maxKeys],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 1)
      throw new QkValueError(op, arg, `must be a positive integer, got ${v}.`);
  }
  return Tensor.empty([cudaAttentionWorkspaceBytes(qHeads, headDim, maxKeys)], 'u8', 'cuda');
}
