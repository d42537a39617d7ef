import { checkFloat, checkSameDtype, checkShape, commonDevice } from '../check.js';
import type { Activation } from '../core/activation.js';
import { cudaBinary, cudaUnary } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import type { Tensor } from '../tensor.js';

/** Options of the elementwise ops. */
export interface ElementwiseOptions {
  /** Write the result here (same shape, dtype and device as the input) instead of a new tensor. */
  out?: Tensor;
}

/** Which GELU: the exact erf form (`'none'`, PyTorch's default) or the tanh approximation (`'tanh'`). */
export type GeluApproximation = 'none' | 'tanh';

const SQRT_PI = Math.sqrt(Math.PI);
const SQRT_HALF = Math.SQRT1_2;
const GELU_TANH_K = Math.sqrt(2 / Math.PI);

/**
 * The error function in float64 (absolute error below 1e-13): Maclaurin series for |x| < 2.5, a continued
 * fraction for erfc beyond (evaluated from the tail), and ±1 past 6 where erfc underflows float64 precision.
 */
export function erf(x: number): number {
  if (Number.isNaN(x)) return Number.NaN;
  const ax = Math.abs(x);
  if (ax >= 6) return Math.sign(x);
  if (ax < 2.5) {
    // erf x = 2/√π · Σ (-1)^n x^(2n+1) / (n! (2n+1))
    const x2 = x * x;
    let term = x; // (-1)^n x^(2n+1) / n!
    let sum = x;
    for (let n = 1; n < 60; n++) {
      term *= -x2 / n;
      const next = term / (2 * n + 1);
      sum += next;
      if (Math.abs(next) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / SQRT_PI) * sum;
  }
  // erfc x = e^(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + …)))))
  let frac = ax;
  for (let k = 60; k >= 1; k--) frac = ax + k / 2 / frac;
  const erfc = Math.exp(-ax * ax) / SQRT_PI / frac;
  return Math.sign(x) * (1 - erfc);
}

/** Scalar SiLU (swish): `x · sigmoid(x)`. */
export function siluScalar(x: number): number {
  return x / (1 + Math.exp(-x));
}

/** Scalar GELU, exact (erf) or tanh-approximated. */
export function geluScalar(x: number, approximate: GeluApproximation = 'none'): number {
  if (approximate === 'tanh') return 0.5 * x * (1 + Math.tanh(GELU_TANH_K * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + erf(x * SQRT_HALF));
}

/** The scalar function for an epilogue activation. */
export function activationFn(activation: Activation, op: string): (x: number) => number {
  switch (activation) {
    case 'none':
      return (x) => x;
    case 'silu':
      return siluScalar;
    case 'gelu':
      return (x) => geluScalar(x, 'none');
    case 'gelu_tanh':
      return (x) => geluScalar(x, 'tanh');
    default:
      throw new QkValueError(
        op,
        'activation',
        `must be 'none', 'silu', 'gelu' or 'gelu_tanh', got ${String(activation)}.`,
      );
  }
}

function mapFloats<D extends FloatDType>(x: Tensor<D>, fn: (v: number) => number): Tensor<D> {
  const src = readFloats(x);
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = fn(src[i]!);
  return fromFloats(out, x.shape, x.dtype);
}

/** SiLU elementwise: `y = x / (1 + e^(−x))`. Float64 math, one rounding to `x`'s dtype. */
export function silu<D extends FloatDType>(x: Tensor<D>, options: ElementwiseOptions = {}): Tensor<D> {
  const op = 'silu';
  checkFloat(op, 'x', x);
  if (commonDevice(op, { x }) === 'cuda') return cudaUnary(op, 'silu', x, x.dtype, options.out);
  return writeCpuOutput(op, mapFloats(x, siluScalar), options.out);
}

/**
 * GELU elementwise. `approximate: 'none'` (default): `y = x/2 · (1 + erf(x/√2))`;
 * `'tanh'`: `y = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`. Float64 math, one rounding.
 */
export function gelu<D extends FloatDType>(
  x: Tensor<D>,
  options: { approximate?: GeluApproximation } & ElementwiseOptions = {},
): Tensor<D> {
  const op = 'gelu';
  checkFloat(op, 'x', x);
  const approximate = options.approximate ?? 'none';
  if (approximate !== 'none' && approximate !== 'tanh') {
    throw new QkValueError(op, 'approximate', `must be 'none' or 'tanh', got ${String(approximate)}.`);
  }
  if (commonDevice(op, { x }) === 'cuda') {
    return cudaUnary(op, approximate === 'tanh' ? 'geluTanh' : 'gelu', x, x.dtype, options.out);
  }
  return writeCpuOutput(
    op,
    mapFloats(x, (v) => geluScalar(v, approximate)),
    options.out,
  );
}

/** Elementwise `a + b` (same shape and dtype), float64 math, one rounding. */
export function add<D extends FloatDType>(
  a: Tensor<D>,
  b: Tensor<NoInfer<D>>,
  options: ElementwiseOptions = {},
): Tensor<D> {
  return zipFloats('add', a, b, (p, q) => p + q, options.out);
}

/** Elementwise `a · b` (same shape and dtype), float64 math, one rounding. */
export function mul<D extends FloatDType>(
  a: Tensor<D>,
  b: Tensor<NoInfer<D>>,
  options: ElementwiseOptions = {},
): Tensor<D> {
  return zipFloats('mul', a, b, (p, q) => p * q, options.out);
}

function zipFloats<D extends FloatDType>(
  op: 'add' | 'mul',
  a: Tensor<D>,
  b: Tensor<NoInfer<D>>,
  fn: (p: number, q: number) => number,
  out: Tensor | undefined,
): Tensor<D> {
  checkFloat(op, 'a', a);
  checkFloat(op, 'b', b);
  checkSameDtype(op, 'b', b, a, 'a');
  checkShape(op, 'b', b, a.shape, 'elementwise ops need equal shapes');
  if (commonDevice(op, { a, b }) === 'cuda') return cudaBinary(op, op, a, b, 'none', a.dtype, out);
  const x = readFloats(a);
  const y = readFloats(b);
  const result = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) result[i] = fn(x[i]!, y[i]!);
  return writeCpuOutput(op, fromFloats(result, a.shape, a.dtype), out);
}
