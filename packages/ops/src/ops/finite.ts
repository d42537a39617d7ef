import { checkFloat } from '../check.js';
import { cudaFindNonFinite } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import type { Tensor } from '../tensor.js';

/** Where a float tensor holds NaN or ±Inf: how many such elements, and the flat index of the first (-1: none). */
export interface NonFiniteStats {
  readonly count: number;
  readonly first: number;
}

/**
 * The reference of {@link findNonFinite} over raw storage: f32 values, or f16/bf16 bit patterns (an element is
 * non-finite exactly when all its exponent bits are set).
 */
export function nonFiniteStats(storage: ArrayLike<number>, dtype: FloatDType): NonFiniteStats {
  let count = 0;
  let first = -1;
  const n = storage.length;
  if (dtype === 'f32') {
    for (let i = 0; i < n; i++) {
      if (Number.isFinite(storage[i]!)) continue;
      if (count++ === 0) first = i;
    }
  } else {
    const mask = dtype === 'bf16' ? 0x7f80 : 0x7c00;
    for (let i = 0; i < n; i++) {
      if ((storage[i]! & mask) !== mask) continue;
      if (count++ === 0) first = i;
    }
  }
  return { count, first };
}

/**
 * Counts the NaN and ±Inf elements of float tensor `x` and finds the first (flat, row-major index). On CUDA this is
 * one pass over the bytes on the device (a model's weights check in milliseconds) and a 16-byte read back; on the CPU
 * a loop over the storage.
 */
export function findNonFinite(x: Tensor): NonFiniteStats {
  checkFloat('findNonFinite', 'x', x);
  if (x.device === 'cuda') return cudaFindNonFinite(x as Tensor<FloatDType>);
  return nonFiniteStats(x.data as ArrayLike<number>, x.dtype as FloatDType);
}
