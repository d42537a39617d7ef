import { isFloatDType } from '../dtype.js';
import { QkAssertionError } from '../errors.js';
import { formatShape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { type Tolerance, type ToleranceOp, toleranceFor } from './tolerances.js';

/** How two arrays differ. */
export interface Closeness {
  /** `‖actual − expected‖₂ / ‖expected‖₂` over the finite pairs (the absolute norm when `expected` is all zero). */
  relL2: number;
  /** Largest `|actual − expected|` over the finite pairs. */
  maxAbs: number;
  /** Flat index of `maxAbs` (-1 when there are no finite pairs). */
  maxAbsIndex: number;
  /** Indices where one side is NaN/±∞ and the other is not the same non-finite value. */
  nonFiniteMismatches: number[];
  /** Number of elements compared. */
  count: number;
}

type Values = Tensor | ArrayLike<number>;

function values(v: Values, arg: string): { data: ArrayLike<number>; shape?: readonly number[] } {
  if (v instanceof Tensor) {
    return { data: isFloatDType(v.dtype) ? v.toFloat32Array() : v.toArray(), shape: v.shape };
  }
  if (v !== null && typeof v === 'object' && typeof v.length === 'number') return { data: v };
  throw new QkAssertionError(`assertClose: "${arg}" must be a Tensor or an array of numbers.`);
}

function sameNonFinite(a: number, b: number): boolean {
  return (Number.isNaN(a) && Number.isNaN(b)) || (a === b && !Number.isFinite(a));
}

/** Measures how `actual` differs from `expected` (same length required). */
export function closeness(actual: Values, expected: Values): Closeness {
  const a = values(actual, 'actual');
  const e = values(expected, 'expected');
  if (a.shape !== undefined && e.shape !== undefined && formatShape(a.shape) !== formatShape(e.shape)) {
    throw new QkAssertionError(
      `shapes differ: actual ${formatShape(a.shape)}, expected ${formatShape(e.shape)}.`,
    );
  }
  if (a.data.length !== e.data.length) {
    throw new QkAssertionError(`lengths differ: actual ${a.data.length}, expected ${e.data.length}.`);
  }
  let diffSq = 0;
  let refSq = 0;
  let maxAbs = 0;
  let maxAbsIndex = -1;
  const nonFiniteMismatches: number[] = [];
  for (let i = 0; i < a.data.length; i++) {
    const x = a.data[i]!;
    const y = e.data[i]!;
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      if (!sameNonFinite(x, y)) nonFiniteMismatches.push(i);
      continue;
    }
    const d = Math.abs(x - y);
    diffSq += d * d;
    refSq += y * y;
    if (d > maxAbs || maxAbsIndex < 0) {
      maxAbs = d;
      maxAbsIndex = i;
    }
  }
  const relL2 = refSq > 0 ? Math.sqrt(diffSq / refSq) : Math.sqrt(diffSq);
  return { relL2, maxAbs, maxAbsIndex, nonFiniteMismatches, count: a.data.length };
}

/** Options of {@link assertClose}: explicit bounds, or an op × dtype entry of the tolerance table. */
export type CloseOptions = Tolerance | { op: ToleranceOp; dtype: 'f32' | 'f16' | 'bf16' };

/**
 * Throws `QkAssertionError` unless `actual` matches `expected`: relative L2 error ≤ `rtol`, every elementwise
 * difference ≤ `atol`, and NaN/±∞ in exactly the same places. The message reports both measures and the first
 * offending indices with their values. Returns the measured {@link Closeness}.
 */
export function assertClose(
  actual: Values,
  expected: Values,
  options: CloseOptions,
  label = 'values',
): Closeness {
  const tol = 'op' in options ? toleranceFor(options.op, options.dtype) : options;
  const c = closeness(actual, expected);
  const a = values(actual, 'actual').data;
  const e = values(expected, 'expected').data;
  // The first offending indices in order, whether they break atol or mismatch a NaN/inf.
  const bad: number[] = [];
  for (let i = 0; i < a.length && bad.length < 8; i++) {
    const x = a[i]!;
    const y = e[i]!;
    const finite = Number.isFinite(x) && Number.isFinite(y);
    if (finite ? Math.abs(x - y) > tol.atol : !sameNonFinite(x, y)) bad.push(i);
  }
  const ok = c.nonFiniteMismatches.length === 0 && c.relL2 <= tol.rtol && c.maxAbs <= tol.atol;
  if (!ok) {
    const shown = bad
      .slice(0, 8)
      .map((i) => `[${i}] actual ${a[i]} expected ${e[i]}`)
      .join('; ');
    const reasons = [
      c.relL2 > tol.rtol ? `relative L2 ${c.relL2.toExponential(3)} > rtol ${tol.rtol}` : '',
      c.maxAbs > tol.atol
        ? `max abs ${c.maxAbs.toExponential(3)} at [${c.maxAbsIndex}] > atol ${tol.atol}`
        : '',
      c.nonFiniteMismatches.length > 0 ? `${c.nonFiniteMismatches.length} NaN/inf mismatches` : '',
    ].filter(Boolean);
    throw new QkAssertionError(
      `${label} not close (${c.count} elements): ${reasons.join(', ')}. First bad indices: ${shown || 'none beyond the L2 bound'}.`,
    );
  }
  return c;
}
