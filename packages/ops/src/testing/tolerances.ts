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
  | 'linearInt4';

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

export const TOLERANCES: Readonly<Record<ToleranceOp, Readonly<Record<FloatDType, Tolerance>>>> =
  Object.freeze({
    rmsnorm: reduction,
    fusedAddRmsnorm: reduction,
    qkNorm: reduction,
    rope: elementwise,
    silu: elementwise,
    gelu: elementwise,
    swiglu: elementwise,
    add: elementwise,
    mul: elementwise,
    linear: reduction,
    embedding: { f32: { rtol: 0, atol: 0 }, f16: { rtol: 0, atol: 0 }, bf16: { rtol: 0, atol: 0 } },
    softmax: reduction,
    attention: reduction,
    linearInt8: reduction,
    linearInt4: reduction,
  });

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
