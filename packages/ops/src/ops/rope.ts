import {
  checkDtype,
  checkFinite,
  checkFloat,
  checkNonNegativeInt,
  checkPositive,
  checkRank,
} from '../check.js';
import type { FloatDType } from '../dtype.js';
import { QkShapeError, QkValueError } from '../errors.js';
import { fromFloats, readFloats } from '../io.js';
import { formatShape } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Options of {@link rope}. */
export interface RopeOptions {
  /** Absolute position of each token (length = tokens), as a number array, Int32Array or i32 tensor. */
  positions: ArrayLike<number> | Tensor<'i32'>;
  /** Base of the frequencies. Default `1_000_000` (Qwen3's `rope_theta`). */
  theta?: number;
}

/** Qwen3's default `rope_theta`. */
export const DEFAULT_ROPE_THETA = 1_000_000;

/**
 * The rotary inverse frequencies for a head of `headDim`, computed in float32 as HF does:
 * `invFreq[i] = 1 / theta^(2i / headDim)` for `i < headDim / 2`.
 */
export function ropeInvFreq(headDim: number, theta: number): Float32Array {
  const op = 'ropeInvFreq';
  checkNonNegativeInt(op, 'headDim', headDim);
  if (headDim % 2 !== 0)
    throw new QkValueError(op, 'headDim', `must be even (rotate-half pairs), got ${headDim}.`);
  checkPositive(op, 'theta', theta);
  const half = headDim / 2;
  const inv = new Float32Array(half);
  for (let i = 0; i < half; i++)
    inv[i] = Math.fround(1 / Math.fround(theta ** Math.fround((2 * i) / headDim)));
  return inv;
}

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
  const theta = checkPositive(op, 'theta', options.theta ?? DEFAULT_ROPE_THETA);
  const raw = options.positions;
  if (raw === undefined || raw === null)
    throw new QkValueError(op, 'positions', 'is required: one position per token.');
  if (raw instanceof Tensor) checkDtype(op, 'positions', raw, ['i32'] as const);
  const positions = raw instanceof Tensor ? raw.toArray() : raw;
  if (positions.length !== tokens) {
    throw new QkShapeError({
      op,
      arg: 'positions',
      expected: `${tokens} positions (one per token of x)`,
      got: `${positions.length}`,
    });
  }
  const half = headDim / 2;
  const invFreq = ropeInvFreq(headDim, theta);
  const src = readFloats(x);
  const out = new Float32Array(x.size);
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  for (let t = 0; t < tokens; t++) {
    const p = checkFinite(op, 'positions', positions[t]);
    if (!Number.isInteger(p) || p < 0)
      throw new QkValueError(op, 'positions', `must hold non-negative integers, got ${p} at index ${t}.`);
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
  return fromFloats(out, x.shape, x.dtype);
}
