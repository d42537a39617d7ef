/**
 * How close a kernel must come to the reference, per op and dtype. `rtol` bounds the relative L2 error
 * `‖out − ref‖ / ‖ref‖`; `atol` bounds the largest absolute difference of any element.
 *
 * The numbers follow from the output format: an f32 result rounded once is within ~6e-8 relative of exact,
 * but a kernel may sum in a different order (1e-5 leaves room for long reductions); bf16 keeps 8 significant
 * bits (relative step 2^-8 ≈ 3.9e-3), f16 keeps 11 (2^-11 ≈ 4.9e-4). Ops whose outputs pass through
 * exponentials or long dot products get more room for max-abs.
 */
import type { FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';

export interface Tolerance {
  /** Bound on the relative L2 error. */
  rtol: number;
  /** Bound on the largest absolute elementwise difference. */
  atol: number;
}

/** Ops that have a tolerance entry. */
export type ToleranceOp =
  | 'rmsnorm'
  | 'fusedAddRmsnorm'
  | 'qkNorm'
  | 'qkNormRope'
  | 'qkNormRopeAppend'
  | 'rmsnormEager'
  | 'swigluEager'
  | 'rope'
  | 'silu'
  | 'gelu'
  | 'swiglu'
  | 'add'
  | 'mul'
  | 'linear'
  | 'embedding'
  | 'softmax'
  | 'attention'
  | 'linearInt8'
  | 'linearInt4'
  | 'rmsnormLinear'
  | 'linearSwiglu'
  | 'quantizeInt8'
  | 'quantizeInt4'
  | 'argmax'
  | 'findNonFinite'
  | 'sample'
  | 'applyLogitControls';

const elementwise: Record<FloatDType, Tolerance> = {
  f32: { rtol: 1e-6, atol: 1e-5 },
  f16: { rtol: 1e-3, atol: 1e-2 },
  bf16: { rtol: 8e-3, atol: 6e-2 },
};

const reduction: Record<FloatDType, Tolerance> = {
  f32: { rtol: 1e-5, atol: 1e-4 },
  f16: { rtol: 2e-3, atol: 2e-2 },
  bf16: { rtol: 1e-2, atol: 1e-1 },
};

/**
 * Dot products of thousands of terms in float32 (the GPU) against float64 (the reference): the float32 error
 * grows with K and is measured relative to a result that cancellation can make small (a single output of
 * N = 1 has no other elements to average over), so f32 needs more relative room than other reductions.
 */
const dot: Record<FloatDType, Tolerance> = {
  f32: { rtol: 1e-4, atol: 1e-4 },
  f16: reduction.f16,
  bf16: reduction.bf16,
};

export const TOLERANCES: Readonly<Record<ToleranceOp, Readonly<Record<FloatDType, Tolerance>>>> =
  Object.freeze({
    rmsnorm: reduction,
    fusedAddRmsnorm: reduction,
    qkNorm: reduction,
    qkNormRope: reduction,
    // Queries and keys as qkNormRope; the cached values are copies (their verify cases also compare them bit for bit).
    qkNormRopeAppend: reduction,
    rmsnormEager: reduction,
    // The eager SwiGLU rounds silu(gate) to the dtype before the product: two roundings.
    swigluEager: reduction,
    rope: elementwise,
    silu: elementwise,
    gelu: elementwise,
    swiglu: elementwise,
    add: elementwise,
    mul: elementwise,
    linear: dot,
    embedding: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    softmax: reduction,
    attention: reduction,
    linearInt8: dot,
    linearInt4: dot,
    rmsnormLinear: dot,
    linearSwiglu: dot,
    // The quantizers must reproduce the reference's codes and scales bit for bit.
    quantizeInt8: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    quantizeInt4: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    // Token ids: exact (sampling's verify cases check ids against the reference's probability intervals).
    argmax: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    // A count and an index: exact.
    findNonFinite: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    sample: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    // The controls follow the reference operation for operation in float64 and round once: bit for bit.
    applyLogitControls: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
  });

/** Bits after the leading one of each float format's significand. */
const FRACTION_BITS: Record<FloatDType, number> = { f32: 23, f16: 10, bf16: 7 };

/** The distance between `v` and the next representable magnitude of `dtype` (normal range): one rounding step. */
export function roundingStep(dtype: FloatDType, v: number): number {
  const a = Math.abs(v);
  return a === 0 ? 0 : 2 ** (Math.floor(Math.log2(a)) - FRACTION_BITS[dtype]);
}

/** The tolerance for `op` at `dtype`. */
export function toleranceFor(op: ToleranceOp, dtype: FloatDType): Tolerance {
  const row = Object.hasOwn(TOLERANCES, op) ? TOLERANCES[op] : undefined;
  if (row === undefined) {
    const known = Object.keys(TOLERANCES).join(', ');
    throw new QkValueError(
      'toleranceFor',
      'op',
      `has no tolerance entry: got "${op}", known ops are ${known}.`,
    );
  }
  const t = Object.hasOwn(row, dtype) ? row[dtype] : undefined;
  if (t === undefined)
    throw new QkValueError('toleranceFor', 'dtype', `must be f32, f16 or bf16, got "${dtype}".`);
  return t;
}
