/** The rotary inverse frequencies: read by the RoPE references (src/ops/rope.ts) and uploaded by the CUDA paths. */
import { checkNonNegativeInt, checkPositive } from '../check.js';
import { QkValueError } from '../errors.js';

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
