import {
  checkDim,
  checkDtype,
  checkFinite,
  checkFloat,
  checkNoOverlap,
  checkOutput,
  checkPositive,
  checkPositiveInt,
  checkRank,
  checkSameDtype,
  checkShape,
  commonDevice,
} from '../check.js';
import { ropeInvFreq } from '../core/rope-freq.js';
import { cudaQkNormRope, cudaQkNormRopeAppend, cudaRope, type QkvLayout } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { QkIndexError, QkShapeError, QkValueError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { formatShape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { embedding, scatterRows } from './embedding.js';
import { DEFAULT_RMS_EPS } from './rmsnorm.js';

/** Options of {@link rope}. */
export interface RopeOptions {
  /** Absolute position of each token (length = tokens), as a number array, Int32Array or i32 tensor. */
  positions: ArrayLike<number> | Tensor<'i32'>;
  /** Base of the frequencies. Default `1_000_000` (Qwen3's `rope_theta`). */
  theta?: number;
  /** Write the result here (same shape, dtype and device as `x`) instead of a new tensor. */
  out?: Tensor;
}

/** Options of {@link qkNormRope}: those of {@link rope} plus the RMSNorm epsilon. */
export interface QkNormRopeOptions extends RopeOptions {
  /** Added to the mean square before the square root. Default `1e-6` (Qwen3's `rms_norm_eps`). */
  eps?: number;
}

/** Qwen3's default `rope_theta`. */
export const DEFAULT_ROPE_THETA = 1_000_000;

/**
 * Rotary position embedding, rotate-half convention (HF `apply_rotary_pos_emb`, used by Qwen3).
 *
 * `x` is `[tokens, heads, headDim]` (headDim even). For token t at position p and `i < headDim/2`, with
 * `angle = fround(p · invFreq[i])` (float32, as HF builds it):
 *
 * `y[i] = x[i]·cos(angle) − x[i + headDim/2]·sin(angle)`, `y[i + headDim/2] = x[i + headDim/2]·cos(angle) + x[i]·sin(angle)`.
 *
 * The reference evaluates cos/sin and the products in float64 and rounds once; HF rounds cos/sin and each
 * product to the model dtype, a difference inside the bf16 tolerance.
 */
export function rope<D extends FloatDType>(x: Tensor<D>, options: RopeOptions): Tensor<D> {
  const op = 'rope';
  checkFloat(op, 'x', x);
  const [tokens, heads, headDim] = checkRopeShape(op, x);
  const theta = checkPositive(op, 'theta', options?.theta ?? DEFAULT_ROPE_THETA);
  if (commonDevice(op, { x }) === 'cuda') {
    return cudaRope(x, ropePositions(op, options?.positions, tokens, 'cuda'), theta, options.out);
  }
  const positions = ropePositions(op, options?.positions, tokens, 'cpu');
  const out = new Float32Array(x.size);
  rotateHalf(readFloats(x), tokens, heads, headDim, positions, ropeInvFreq(headDim, theta), out);
  return writeCpuOutput(op, fromFloats(out, x.shape, x.dtype), options.out);
}

/**
 * Qwen3's QK-norm followed by RoPE, the two steps every query and key head takes before attention, fused:
 *
 * `v = x · weight / sqrt(mean(x², head) + eps)` per head (as {@link qkNorm}), then `y = rope(v)` (as
 * {@link rope}): for pair `i < headDim/2` at position p, `angle = fround(p · invFreq[i])`,
 * `y[i] = v[i]·cos(angle) − v[i + headDim/2]·sin(angle)`, `y[i + headDim/2] = v[i + headDim/2]·cos(angle) + v[i]·sin(angle)`.
 *
 * `x` is `[tokens, heads, headDim]` (headDim even), `weight` is `[headDim]` of `x`'s dtype, shared by all heads.
 * The reference computes the norm and the rotation in float64 and rounds once; HF rounds the normalised head to
 * the model dtype before rotating (and rounds cos/sin and each product), a difference inside the bf16 tolerance.
 */
export function qkNormRope<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<NoInfer<D>>,
  options: QkNormRopeOptions,
): Tensor<D> {
  const op = 'qkNormRope';
  checkFloat(op, 'x', x);
  const [tokens, heads, headDim] = checkRopeShape(op, x);
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  checkRank(op, 'weight', weight, 1, 'weight is [headDim], shared by all heads');
  checkDim(op, 'weight', weight, 0, headDim, 'one weight per element of a head (headDim)');
  const theta = checkPositive(op, 'theta', options?.theta ?? DEFAULT_ROPE_THETA);
  const eps = checkPositive(op, 'eps', options?.eps ?? DEFAULT_RMS_EPS);
  if (commonDevice(op, { x, weight }) === 'cuda') {
    const positions = ropePositions(op, options?.positions, tokens, 'cuda');
    return cudaQkNormRope(x, weight, positions, theta, eps, options.out);
  }
  const positions = ropePositions(op, options?.positions, tokens, 'cpu');
  const src = readFloats(x);
  const w = readFloats(weight);
  // float64 per-head RMSNorm, then the rotation from the unrounded values.
  const normed = new Float64Array(x.size);
  for (let row = 0; row < tokens * heads; row++) {
    const base = row * headDim;
    let sumSq = 0;
    for (let i = 0; i < headDim; i++) sumSq += src[base + i]! * src[base + i]!;
    const inv = 1 / Math.sqrt(sumSq / headDim + eps);
    for (let i = 0; i < headDim; i++) normed[base + i] = src[base + i]! * inv * w[i]!;
  }
  const out = new Float64Array(x.size);
  rotateHalf(normed, tokens, heads, headDim, positions, ropeInvFreq(headDim, theta), out);
  return writeCpuOutput(op, fromFloats(out, x.shape, x.dtype), options.out);
}

/** Options of {@link qkNormRopeAppend}. */
export interface QkNormRopeAppendOptions<D extends FloatDType = FloatDType> {
  /** Query heads in each row of `qkv` (Qwen3's `num_attention_heads`). */
  qHeads: number;
  /** Key heads, and as many value heads, in each row of `qkv` (Qwen3's `num_key_value_heads`). */
  kvHeads: number;
  /**
   * Position of each token (length = tokens), as a number array, Int32Array or i32 tensor: its RoPE position and
   * the cache row its key and value are written to.
   */
  positions: ArrayLike<number> | Tensor<'i32'>;
  /** Base of the frequencies. Default `1_000_000` (Qwen3's `rope_theta`). */
  theta?: number;
  /** Added to the mean square before the square root. Default `1e-6` (Qwen3's `rms_norm_eps`). */
  eps?: number;
  /** Key cache `[rows, kvHeads, headDim]` (dtype and device of `qkv`), written in place at the positions. */
  kCache: Tensor<NoInfer<D>>;
  /** Value cache, shaped like `kCache`, written in place at the positions. */
  vCache: Tensor<NoInfer<D>>;
  /** Write the queries here (`[tokens, qHeads, headDim]`, dtype and device of `qkv`) instead of a new tensor. */
  out?: Tensor;
}

/** Largest headDim the fused CUDA kernel serves; wider heads run qkNormRope and scatterRows. */
const QK_NORM_ROPE_APPEND_FUSED_MAX_HEAD_DIM = 256;

/**
 * Everything between Qwen3's fused q|k|v projection and attention, in one op: QK-norm + RoPE of the query and key
 * heads, and the append of keys and values to the KV cache.
 *
 * `qkv` is `[tokens, (qHeads + 2·kvHeads)·headDim]` or `[tokens, qHeads + 2·kvHeads, headDim]`: per token the
 * query heads, then the key heads, then the value heads; `headDim` is the length of `qNormWeight` (and of
 * `kNormWeight`), even. Defined as the composition
 *
 * - `q = qkNormRope(query heads, qNormWeight, { positions, theta, eps })`, returned as `[tokens, qHeads, headDim]`
 *   (into `out` when given);
 * - `k = qkNormRope(key heads, kNormWeight, { positions, theta, eps })`, then `scatterRows(kCache, k, positions)`;
 * - `scatterRows(vCache, value heads, positions)`: values are copied bit for bit.
 *
 * The RoPE position of token t is `positions[t]` itself, as for {@link qkNormRope}. Cache rows follow
 * {@link scatterRows}: host positions (an array, or an i32 tensor on the CPU) are checked, and one outside
 * `[0, rows)` of the caches throws `QkIndexError`; positions in an i32 CUDA tensor are read by the kernel and not
 * read back (a captured CUDA graph appends wherever the tensor points at replay), and one outside `[0, rows)` writes
 * no cache row while its queries are still produced. Repeated positions leave one of their tokens' rows (which one
 * is unspecified on CUDA). On CUDA, heads up to 256 wide run one fused kernel; wider heads run the ops above.
 */
export function qkNormRopeAppend<D extends FloatDType>(
  qkv: Tensor<D>,
  qNormWeight: Tensor<NoInfer<D>>,
  kNormWeight: Tensor<NoInfer<D>>,
  options: QkNormRopeAppendOptions<D>,
): Tensor<D> {
  const op = 'qkNormRopeAppend';
  checkFloat(op, 'qkv', qkv);
  checkFloat(op, 'qNormWeight', qNormWeight);
  checkSameDtype(op, 'qNormWeight', qNormWeight, qkv, 'qkv');
  checkRank(op, 'qNormWeight', qNormWeight, 1, 'qNormWeight is [headDim], shared by all query heads');
  const headDim = qNormWeight.shape[0]!;
  if (headDim % 2 !== 0) {
    throw new QkShapeError({
      op,
      arg: 'qNormWeight',
      expected: 'an even length (headDim, split into rotate-half pairs)',
      got: formatShape(qNormWeight.shape),
    });
  }
  checkFloat(op, 'kNormWeight', kNormWeight);
  checkSameDtype(op, 'kNormWeight', kNormWeight, qkv, 'qkv');
  checkShape(op, 'kNormWeight', kNormWeight, [headDim], 'key heads are as wide as query heads');
  const qHeads = checkPositiveInt(op, 'qHeads', options?.qHeads);
  const kvHeads = checkPositiveInt(op, 'kvHeads', options?.kvHeads);
  const heads = qHeads + 2 * kvHeads;
  const tokens = qkvTokens(op, qkv, heads, headDim);
  const { kCache, vCache, out } = options;
  checkFloat(op, 'kCache', kCache);
  checkSameDtype(op, 'kCache', kCache, qkv, 'qkv');
  checkRank(op, 'kCache', kCache, 3, 'kCache is [rows, kvHeads, headDim]');
  checkDim(op, 'kCache', kCache, 1, kvHeads, 'one cached key per key head');
  checkDim(op, 'kCache', kCache, 2, headDim, 'cached keys are as wide as the heads');
  checkFloat(op, 'vCache', vCache);
  checkSameDtype(op, 'vCache', vCache, qkv, 'qkv');
  checkShape(op, 'vCache', vCache, kCache.shape, 'the value cache is shaped like the key cache');
  const theta = checkPositive(op, 'theta', options.theta ?? DEFAULT_ROPE_THETA);
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  const raw = options.positions;
  const devicePositions = raw instanceof Tensor && raw.device === 'cuda' ? { positions: raw } : {};
  const device = commonDevice(op, { qkv, qNormWeight, kNormWeight, kCache, vCache, ...devicePositions });
  if (out !== undefined) checkOutput(op, 'out', out, [tokens, qHeads, headDim], qkv.dtype, device);
  const ownMemory = 'the op reads qkv while it writes its outputs, so each output needs its own tensor.';
  checkNoOverlap(op, 'kCache', kCache, { qkv, vCache }, ownMemory);
  checkNoOverlap(op, 'vCache', vCache, { qkv }, ownMemory);
  if (out !== undefined) checkNoOverlap(op, 'out', out, { qkv, kCache, vCache }, ownMemory);
  const rows = kCache.shape[0]!;
  const positions =
    device === 'cuda' ? ropePositions(op, raw, tokens, 'cuda') : ropePositions(op, raw, tokens, 'cpu');
  if (!(positions instanceof Tensor)) {
    for (let t = 0; t < tokens; t++) {
      const p = positions[t]!;
      if (p >= rows) {
        throw new QkIndexError(
          op,
          'positions',
          p,
          rows,
          `at token ${t}: a position is also the cache row its key and value go to, so the caches need more rows`,
        );
      }
    }
  }

  const layout = { tokens, qHeads, kvHeads, headDim };
  if (device === 'cuda' && headDim <= QK_NORM_ROPE_APPEND_FUSED_MAX_HEAD_DIM) {
    const at = positions as Int32Array | Tensor<'i32'>;
    return cudaQkNormRopeAppend(
      qkv,
      qNormWeight,
      kNormWeight,
      { kCache, vCache },
      at,
      layout,
      theta,
      eps,
      out,
    );
  }
  // The reference, and the CUDA path for wide heads: gather each group of heads, then the separate ops.
  const temps: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    temps.push(t);
    return t;
  };
  try {
    const headRows = keep(qkv.reshape([tokens * heads, headDim]));
    const group = (first: number, count: number) => keep(gatherHeads(headRows, layout, heads, first, count));
    const norm = { positions, theta, eps };
    const q = qkNormRope(group(0, qHeads), qNormWeight, { ...norm, out });
    scatterRows(kCache, keep(qkNormRope(group(qHeads, kvHeads), kNormWeight, norm)), positions);
    scatterRows(vCache, group(qHeads + kvHeads, kvHeads), positions);
    return q;
  } finally {
    for (const t of temps) t.dispose();
  }
}

/**
 * Heads `[first, first + count)` of every token of `headRows` (`[tokens · heads, headDim]`) as a new
 * `[tokens, count, headDim]` tensor: an embedding lookup of those head rows, which copies them bit for bit.
 */
function gatherHeads<D extends FloatDType>(
  headRows: Tensor<D>,
  layout: QkvLayout,
  heads: number,
  first: number,
  count: number,
): Tensor<D> {
  const ids = new Int32Array(layout.tokens * count);
  for (let t = 0; t < layout.tokens; t++) {
    for (let h = 0; h < count; h++) ids[t * count + h] = t * heads + first + h;
  }
  return embedding(Tensor.fromStorage(ids, [layout.tokens, count], 'i32'), headRows);
}

/** Checks that `qkv` holds `heads` heads of `headDim` per token, flat or split, and returns the token count. */
function qkvTokens(op: string, qkv: Tensor, heads: number, headDim: number): number {
  const [tokens = 0, ...rest] = qkv.shape;
  const flat = qkv.rank === 2 && rest[0] === heads * headDim;
  const split = qkv.rank === 3 && rest[0] === heads && rest[1] === headDim;
  if (!flat && !split) {
    throw new QkShapeError({
      op,
      arg: 'qkv',
      expected: `[tokens, ${heads * headDim}] or [tokens, ${heads}, ${headDim}]`,
      got: formatShape(qkv.shape),
      hint: `qHeads + 2·kvHeads = ${heads} heads of headDim ${headDim}, the length of qNormWeight`,
    });
  }
  return tokens;
}

/** Checks that `x` is `[tokens, heads, headDim]` with an even headDim and returns the three extents. */
function checkRopeShape(op: string, x: Tensor): [number, number, number] {
  checkRank(op, 'x', x, 3, 'x is [tokens, heads, headDim]');
  const [tokens, heads, headDim] = x.shape as [number, number, number];
  if (headDim % 2 !== 0) {
    throw new QkShapeError({
      op,
      arg: 'x',
      expected: 'an even headDim (last axis)',
      got: formatShape(x.shape),
    });
  }
  return [tokens, heads, headDim];
}

/**
 * The positions of `tokens` tokens, checked: non-negative integers, one per token. For the CUDA path they must
 * also fit in i32 and come back as an Int32Array to upload, or as the i32 CUDA tensor itself, whose values the
 * caller vouches for (they are not read back).
 */
function ropePositions(
  op: string,
  raw: RopeOptions['positions'] | undefined,
  tokens: number,
  device: 'cpu',
): ArrayLike<number>;
function ropePositions(
  op: string,
  raw: RopeOptions['positions'] | undefined,
  tokens: number,
  device: 'cuda',
): Int32Array | Tensor<'i32'>;
function ropePositions(
  op: string,
  raw: RopeOptions['positions'] | undefined,
  tokens: number,
  device: 'cpu' | 'cuda',
): ArrayLike<number> | Tensor<'i32'> {
  if (raw === undefined || raw === null)
    throw new QkValueError(op, 'positions', 'is required: one position per token.');
  if (raw instanceof Tensor) checkDtype(op, 'positions', raw, ['i32'] as const);
  const length = raw instanceof Tensor ? raw.size : raw.length;
  if (length !== tokens) {
    throw new QkShapeError({
      op,
      arg: 'positions',
      expected: `${tokens} positions (one per token of x)`,
      got: `${length}`,
    });
  }
  if (device === 'cuda' && raw instanceof Tensor && raw.device === 'cuda') return raw;
  const values = raw instanceof Tensor ? raw.toArray() : raw;
  for (let t = 0; t < values.length; t++) {
    const p = checkFinite(op, 'positions', values[t]);
    if (!Number.isInteger(p) || p < 0)
      throw new QkValueError(op, 'positions', `must hold non-negative integers, got ${p} at index ${t}.`);
    if (device === 'cuda' && p > 0x7fffffff)
      throw new QkValueError(op, 'positions', `must fit in i32 on "cuda", got ${p} at index ${t}.`);
  }
  return device === 'cuda' ? Int32Array.from(values) : values;
}

/**
 * Rotate-half RoPE of `src` (`[tokens, heads, headDim]`) into `out`: cos/sin of the float32 angles and the
 * products in float64.
 */
function rotateHalf(
  src: ArrayLike<number>,
  tokens: number,
  heads: number,
  headDim: number,
  positions: ArrayLike<number>,
  invFreq: Float32Array,
  out: Float32Array | Float64Array,
): void {
  const half = headDim / 2;
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  for (let t = 0; t < tokens; t++) {
    const p = positions[t]!;
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invFreq[i]!);
      cos[i] = Math.cos(angle);
      sin[i] = Math.sin(angle);
    }
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const a = src[base + i]!;
        const b = src[base + half + i]!;
        out[base + i] = a * cos[i]! - b * sin[i]!;
        out[base + half + i] = b * cos[i]! + a * sin[i]!;
      }
    }
  }
}
