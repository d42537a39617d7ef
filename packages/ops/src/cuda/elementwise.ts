/**
 * CUDA paths of the elementwise family: activations, add/mul, RoPE and QK-norm + RoPE, SwiGLU, embedding, and
 * the unfused eager baselines (kernels: packages/cuda-core/csrc/kernels/elementwise.cu, rope.cu, swiglu.cu,
 * embedding.cu). The ops validate their arguments before calling these.
 */
import type { BinaryOp, Binding, Broadcast, UnaryOp } from '@qk/cuda-core';
import { ropeInvFreq } from '../core/rope-freq.js';
import { DTYPES, type FloatDType } from '../dtype.js';
import { leadingSize, type Shape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { bindingCodes, cudaOutput, dtypeCode, launch, ptr } from './common.js';

// The op names of the binding's code tables (src/binding.ts of @qk/cuda-core); the codes come from the loaded module.
export type UnaryKind = keyof typeof UnaryOp;
export type BinaryKind = keyof typeof BinaryOp;
export type BroadcastKind = keyof typeof Broadcast;

/** `out = kind(x, alpha)` elementwise, reading `x.dtype` and writing `outDtype` (default: `x`'s). */
export function cudaUnary<D extends FloatDType>(
  op: string,
  kind: UnaryKind,
  x: Tensor<FloatDType>,
  outDtype: D,
  out?: Tensor,
  alpha = 0,
): Tensor<D> {
  const y = cudaOutput(op, out, x.shape, outDtype);
  launch(op, (b) =>
    b.unary(
      dtypeCode(x.dtype),
      dtypeCode(outDtype),
      bindingCodes(op).UnaryOp[kind],
      ptr(y),
      ptr(x),
      x.size,
      alpha,
    ),
  );
  return y;
}

/**
 * `out = a (kind) b` over `a` seen as `[rows, n]` (n = last axis), with `b` of `a`'s shape (`none`), `[rows]`
 * (`perRow`) or `[n]` (`perColumn`); the output has `a`'s shape and `outDtype`.
 */
export function cudaBinary<D extends FloatDType>(
  op: string,
  kind: BinaryKind,
  a: Tensor<FloatDType>,
  b: Tensor<FloatDType>,
  broadcast: BroadcastKind,
  outDtype: D,
  out?: Tensor,
): Tensor<D> {
  const y = cudaOutput(op, out, a.shape, outDtype);
  const n = a.rank === 0 ? 1 : a.shape[a.rank - 1]!;
  const rows = a.rank === 0 ? 1 : leadingSize(a.shape);
  const codes = bindingCodes(op);
  launch(op, (bd) =>
    bd.binary(
      dtypeCode(outDtype),
      codes.BinaryOp[kind],
      ptr(y),
      dtypeCode(a.dtype),
      ptr(a),
      dtypeCode(b.dtype),
      ptr(b),
      rows,
      n,
      codes.Broadcast[broadcast],
    ),
  );
  return y;
}

/** f32 mean of each row of `x` (`[..., n]` → `[...]`). */
export function cudaRowMean(op: string, x: Tensor<FloatDType>): Tensor<'f32'> {
  const n = x.shape[x.rank - 1]!;
  const y = Tensor.empty(x.shape.slice(0, -1), 'f32', 'cuda');
  launch(op, (b) => b.rowMean(dtypeCode(x.dtype), ptr(y), ptr(x), leadingSize(x.shape), n));
  return y;
}

/**
 * NaN/±Inf census of `x` on the device into `out` (i32 `[4]`: two little-endian u64, the count and the index of the
 * first, all ones when there is none).
 */
export function cudaNonFiniteStats(op: string, x: Tensor<FloatDType>, out: Tensor): void {
  const y = cudaOutput(op, out, [4], 'i32');
  launch(op, (b) => b.findNonFinite(dtypeCode(x.dtype), ptr(y), ptr(x), x.size));
}

/** The u64 at `words[i]`, `words[i + 1]` (low word first) as a number, or -1 for all ones. */
function u64At(words: ArrayLike<number>, i: number): number {
  const lo = words[i]! >>> 0;
  const hi = words[i + 1]! >>> 0;
  if (lo === 0xffffffff && hi === 0xffffffff) return -1;
  return hi * 2 ** 32 + lo;
}

/** Decodes the i32 `[4]` written by {@link cudaNonFiniteStats}. */
export function decodeNonFiniteStats(words: ArrayLike<number>): { count: number; first: number } {
  return { count: u64At(words, 0), first: u64At(words, 2) };
}

/** {@link cudaNonFiniteStats} into a scratch tensor, read back (synchronises the stream). */
export function cudaFindNonFinite(x: Tensor<FloatDType>): { count: number; first: number } {
  const op = 'findNonFinite';
  const out = Tensor.empty([4], 'i32', 'cuda');
  try {
    cudaNonFiniteStats(op, x, out);
    return decodeNonFiniteStats(out.toArray());
  } finally {
    out.dispose();
  }
}

// ---------------------------------------------------------------------------------------------------------
// RoPE

/** Device copies of the rotary inverse frequencies, one per (headDim, theta); small and kept for the process. */
const invFreqCache = new Map<string, Tensor<'f32'>>();

/**
 * The f32 inverse frequencies `ropeInvFreq(headDim, theta)` on the GPU, uploaded on first use (so the first call
 * for a new (headDim, theta) must not happen inside a CUDA graph capture).
 */
export function cudaInvFreq(headDim: number, theta: number): Tensor<'f32'> {
  const key = `${headDim}:${theta}`;
  let t = invFreqCache.get(key);
  if (t === undefined || t.disposed) {
    const host = Tensor.fromStorage(ropeInvFreq(headDim, theta), [headDim / 2], 'f32');
    t = host.to('cuda');
    invFreqCache.set(key, t);
  }
  return t;
}

/**
 * Launches `fn` with i32 values (positions, token ids) at a device address: a CUDA i32 tensor is used as is (the
 * caller vouches for its values); host values (already validated) are uploaded into a fresh tensor that is disposed
 * once the launch is queued (the upload waits for the stream, so graph captures need CUDA tensors).
 */
function launchWithInt32<T>(
  op: string,
  values: Int32Array | Tensor<'i32'>,
  fn: (b: Binding, at: bigint) => T,
): T {
  const onDevice = values instanceof Tensor && values.device === 'cuda';
  const tensor = onDevice
    ? values
    : values instanceof Tensor
      ? values.to('cuda')
      : Tensor.fromStorage(values, [values.length], 'i32').to('cuda');
  try {
    return launch(op, (b) => fn(b, ptr(tensor)));
  } finally {
    if (!onDevice) tensor.dispose();
  }
}

export function cudaRope<D extends FloatDType>(
  x: Tensor<D>,
  positions: Int32Array | Tensor<'i32'>,
  theta: number,
  out?: Tensor,
): Tensor<D> {
  const op = 'rope';
  const [tokens, heads, headDim] = x.shape as [number, number, number];
  const y = cudaOutput(op, out, x.shape, x.dtype);
  const inv = cudaInvFreq(headDim, theta);
  launchWithInt32(op, positions, (b, pos) =>
    b.rope(dtypeCode(x.dtype), ptr(y), ptr(x), pos, ptr(inv), tokens, heads, headDim),
  );
  return y;
}

export function cudaQkNormRope<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<D>,
  positions: Int32Array | Tensor<'i32'>,
  theta: number,
  eps: number,
  out?: Tensor,
): Tensor<D> {
  const op = 'qkNormRope';
  const [tokens, heads, headDim] = x.shape as [number, number, number];
  const y = cudaOutput(op, out, x.shape, x.dtype);
  const inv = cudaInvFreq(headDim, theta);
  launchWithInt32(op, positions, (b, pos) =>
    b.qkNormRope(dtypeCode(x.dtype), ptr(y), ptr(x), ptr(weight), pos, ptr(inv), tokens, heads, headDim, eps),
  );
  return y;
}

/** Head counts and sizes of a {@link cudaQkNormRopeAppend} call (validated by the op). */
export interface QkvLayout {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
}

/**
 * QK-norm + RoPE of the q and k heads of a fused `qkv` row, q into a `[tokens, qHeads, headDim]` output, k and v
 * into row `positions[t]` of their caches (rows outside the caches are skipped by the kernel).
 */
export function cudaQkNormRopeAppend<D extends FloatDType>(
  qkv: Tensor<D>,
  qWeight: Tensor<D>,
  kWeight: Tensor<D>,
  caches: { kCache: Tensor<D>; vCache: Tensor<D> },
  positions: Int32Array | Tensor<'i32'>,
  layout: QkvLayout,
  theta: number,
  eps: number,
  out?: Tensor,
): Tensor<D> {
  const op = 'qkNormRopeAppend';
  const { tokens, qHeads, kvHeads, headDim } = layout;
  const { kCache, vCache } = caches;
  const y = cudaOutput(op, out, [tokens, qHeads, headDim], qkv.dtype);
  if (tokens === 0) return y;
  const inv = cudaInvFreq(headDim, theta);
  launchWithInt32(op, positions, (b, pos) =>
    b.qkNormRopeAppend(
      dtypeCode(qkv.dtype),
      ptr(y),
      ptr(kCache),
      ptr(vCache),
      ptr(qkv),
      ptr(qWeight),
      ptr(kWeight),
      pos,
      ptr(inv),
      tokens,
      qHeads,
      kvHeads,
      headDim,
      kCache.shape[0]!,
      eps,
    ),
  );
  return y;
}

// ---------------------------------------------------------------------------------------------------------
// SwiGLU and embedding

/** SwiGLU on separate `gate`/`up` of one shape. */
export function cudaSwiglu<D extends FloatDType>(gate: Tensor<D>, up: Tensor<D>, out?: Tensor): Tensor<D> {
  const op = 'swiglu';
  const y = cudaOutput(op, out, gate.shape, gate.dtype);
  const ffn = gate.rank === 0 ? 1 : gate.shape[gate.rank - 1]!;
  const rows = gate.rank === 0 ? 1 : leadingSize(gate.shape);
  launch(op, (b) => b.swiglu(dtypeCode(gate.dtype), ptr(y), ptr(gate), ptr(up), rows, ffn, ffn));
  return y;
}

/** SwiGLU on a fused `[..., 2·ffn]` gate-up tensor: up starts `ffn` elements into each row. */
export function cudaSwigluFused<D extends FloatDType>(gateUp: Tensor<D>, out?: Tensor): Tensor<D> {
  const op = 'swigluFused';
  const width = gateUp.shape[gateUp.rank - 1]!;
  const ffn = width / 2;
  const rows = leadingSize(gateUp.shape);
  const y = cudaOutput(op, out, [...gateUp.shape.slice(0, -1), ffn], gateUp.dtype);
  // Each row is gate then up: up starts ffn elements after gate, rows are 2·ffn apart.
  const gate = ptr(gateUp);
  const up = gate + BigInt(ffn * DTYPES[gateUp.dtype].bytes);
  launch(op, (b) => b.swiglu(dtypeCode(gateUp.dtype), ptr(y), gate, up, rows, ffn, width));
  return y;
}

/**
 * Embedding rows on the GPU. `ids`: host ids (already checked against the vocabulary) are uploaded; a CUDA i32
 * tensor is used as is, its ids vouched for by the caller (the kernel never reads outside the table and writes a
 * zero row for an id outside [0, vocab)).
 */
export function cudaEmbedding<D extends FloatDType>(
  ids: Int32Array | Tensor<'i32'>,
  idsShape: Shape,
  table: Tensor<D>,
  out?: Tensor,
): Tensor<D> {
  const op = 'embedding';
  const [vocab, hidden] = table.shape as [number, number];
  const y = cudaOutput(op, out, [...idsShape, hidden], table.dtype);
  const count = ids instanceof Tensor ? ids.size : ids.length;
  if (count === 0) return y;
  launchWithInt32(op, ids, (b, at) =>
    b.embedding(dtypeCode(table.dtype), ptr(y), at, ptr(table), count, vocab, hidden),
  );
  return y;
}

/** dst[index[i]] = src[i] for rows of `rowElems` elements; `index` ids outside `[0, dstRows)` are skipped. */
export function cudaScatterRows<D extends FloatDType>(
  dst: Tensor<D>,
  src: Tensor<D>,
  index: Int32Array | Tensor<'i32'>,
  dstRows: number,
  rowElems: number,
): Tensor<D> {
  const count = index instanceof Tensor ? index.size : index.length;
  if (count === 0) return dst;
  launchWithInt32('scatterRows', index, (b, at) =>
    b.scatterRows(dtypeCode(dst.dtype), ptr(dst), at, ptr(src), count, dstRows, rowElems),
  );
  return dst;
}

// ---------------------------------------------------------------------------------------------------------
// Eager baselines: one launch per PyTorch eager op, intermediates in global memory.

/**
 * HF `Qwen3RMSNorm.forward` op by op: `h = x.to(f32)`; `v = h.pow(2).mean(-1)`; `h = h * rsqrt(v + eps)`;
 * `weight * h.to(dtype)` (the casts are skipped for f32 input, as PyTorch's are no-ops).
 */
export function cudaRmsnormEager<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<D>,
  eps: number,
  out?: Tensor,
): Tensor<D> {
  const op = 'rmsnormEager';
  const y = cudaOutput(op, out, x.shape, x.dtype);
  if (x.size === 0) return y;
  const rows = leadingSize(x.shape);
  const n = x.shape[x.rank - 1]!;
  const temps: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    temps.push(t);
    return t;
  };
  try {
    const flat = keep(x.reshape([rows, n]));
    const h = x.dtype === 'f32' ? flat : keep(cudaUnary(op, 'copy', flat, 'f32'));
    const squared = keep(cudaUnary(op, 'square', h, 'f32'));
    const variance = keep(cudaRowMean(op, squared));
    const rstd = keep(cudaUnary(op, 'rsqrtAddScalar', variance, 'f32', undefined, eps));
    const normed = keep(cudaBinary(op, 'mul', h, rstd, 'perRow', 'f32'));
    const cast = x.dtype === 'f32' ? normed : keep(cudaUnary(op, 'copy', normed, x.dtype));
    const yFlat = keep(y.reshape([rows, n]));
    cudaBinary(op, 'mul', cast, weight, 'perColumn', x.dtype, yFlat);
  } finally {
    for (const t of temps) t.dispose();
  }
  return y;
}

/** HF `Qwen3MLP`'s activation op by op: `silu(gate)` (rounded to the dtype), then `· up`. */
export function cudaSwigluEager<D extends FloatDType>(
  gate: Tensor<D>,
  up: Tensor<D>,
  out?: Tensor,
): Tensor<D> {
  const op = 'swigluEager';
  const y = cudaOutput(op, out, gate.shape, gate.dtype);
  const act = cudaUnary(op, 'silu', gate, gate.dtype);
  try {
    cudaBinary(op, 'mul', act, up, 'none', gate.dtype, y);
  } finally {
    act.dispose();
  }
  return y;
}
