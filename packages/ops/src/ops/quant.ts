import {
  checkDtype,
  checkFloat,
  checkPositiveInt,
  checkRank,
  checkSameDtype,
  checkShape,
  commonDevice,
  requireCpu,
} from '../check.js';
import { matmulRowsByWeightRows } from '../core/matmul.js';
import type { Int4Weight, Int8Weight } from '../core/quant-weight.js';
import { cudaLinearInt4, cudaLinearInt8, cudaQuantizeInt4, cudaQuantizeInt8 } from '../cuda/linear.js';
import type { FloatDType } from '../dtype.js';
import { QkShapeError, QkValueError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { formatShape, leadingSize } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Default INT4 group size. */
export const DEFAULT_INT4_GROUP = 128;

/** Round half to even, as `torch.round` does. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Packs signed int4 values (−8..7) two per byte, low nibble first, offset by 8. */
export function packInt4(values: ArrayLike<number>): Uint8Array {
  if (values.length % 2 !== 0)
    throw new QkValueError('packInt4', 'values', `must have an even length, got ${values.length}.`);
  const out = new Uint8Array(values.length / 2);
  for (let i = 0; i < out.length; i++) {
    const lo = values[2 * i]!;
    const hi = values[2 * i + 1]!;
    for (const [v, at] of [
      [lo, 2 * i],
      [hi, 2 * i + 1],
    ] as const) {
      if (!Number.isInteger(v) || v < -8 || v > 7)
        throw new QkValueError(
          'packInt4',
          'values',
          `holds ${v} at index ${at}, outside the int4 range [-8, 7].`,
        );
    }
    out[i] = (lo + 8) | ((hi + 8) << 4);
  }
  return out;
}

/** Unpacks bytes written by {@link packInt4} into signed values (two per byte). */
export function unpackInt4(packed: ArrayLike<number>): Int8Array {
  const out = new Int8Array(packed.length * 2);
  for (let i = 0; i < packed.length; i++) {
    const byte = packed[i]!;
    out[2 * i] = (byte & 0xf) - 8;
    out[2 * i + 1] = (byte >>> 4) - 8;
  }
  return out;
}

function checkWeightMatrix(op: string, weight: unknown): asserts weight is Tensor<FloatDType> {
  checkFloat(op, 'weight', weight);
  checkRank(op, 'weight', weight, 2, 'weight is [out, in]');
}

/**
 * Quantizes `weight` (`[out, in]`) to INT8 per output channel: `scale = max|row| / 127`, `q = round(w / scale)`.
 * A CUDA weight gives a CUDA {@link Int8Weight}, bit for bit this result (a non-finite row, which throws here,
 * gets a NaN scale and zero codes there: the kernel cannot throw).
 */
export function quantizeInt8(weight: Tensor<FloatDType>): Int8Weight {
  const op = 'quantizeInt8';
  checkWeightMatrix(op, weight);
  if (commonDevice(op, { weight }) === 'cuda') return cudaQuantizeInt8(weight);
  const [outFeatures, n] = weight.shape as [number, number];
  const w = readFloats(weight);
  const q = new Int8Array(w.length);
  const scales = new Float32Array(outFeatures);
  for (let o = 0; o < outFeatures; o++) {
    const base = o * n;
    let absmax = 0;
    for (let k = 0; k < n; k++) absmax = Math.max(absmax, Math.abs(w[base + k]!));
    if (!Number.isFinite(absmax))
      throw new QkValueError(op, 'weight', `row ${o} holds a non-finite value; it cannot be quantized.`);
    const scale = Math.fround(absmax / 127);
    scales[o] = scale;
    if (scale === 0) continue;
    for (let k = 0; k < n; k++)
      q[base + k] = Math.max(-127, Math.min(127, roundHalfEven(w[base + k]! / scale)));
  }
  return {
    qweight: Tensor.fromStorage(q, [outFeatures, n], 'i8'),
    scales: Tensor.fromStorage(scales, [outFeatures], 'f32'),
  };
}

function checkInt8Weight(op: string, qw: Int8Weight): [number, number] {
  if (qw === null || typeof qw !== 'object')
    throw new QkValueError(op, 'weight', 'must be an Int8Weight { qweight, scales } from quantizeInt8.');
  checkDtype(op, 'weight.qweight', qw.qweight, ['i8']);
  checkRank(op, 'weight.qweight', qw.qweight, 2, 'qweight is [out, in]');
  checkDtype(op, 'weight.scales', qw.scales, ['f32']);
  const [outFeatures, n] = qw.qweight.shape as [number, number];
  checkShape(op, 'weight.scales', qw.scales, [outFeatures], 'one scale per output channel');
  return [outFeatures, n];
}

/** `qweight · scales` back to floats of `dtype` (default f32), `[out, in]`. */
export function dequantizeInt8<D extends FloatDType = 'f32'>(qw: Int8Weight, dtype?: D): Tensor<D> {
  const [outFeatures, n] = checkInt8Weight('dequantizeInt8', qw);
  requireCpu('dequantizeInt8', { qweight: qw.qweight, scales: qw.scales });
  const q = qw.qweight.data;
  const s = qw.scales.data;
  const out = new Float32Array(q.length);
  for (let o = 0; o < outFeatures; o++) for (let k = 0; k < n; k++) out[o * n + k] = q[o * n + k]! * s[o]!;
  return fromFloats(out, [outFeatures, n], (dtype ?? 'f32') as D);
}

/**
 * Weight-only INT8 linear: `y[..., o] = (Σ_k x[..., k] · q[o, k]) · scale[o] + bias[o]`. `x` is `[..., in]`;
 * the result is `[..., out]` in `x`'s dtype. Float64 accumulation, one rounding.
 */
export function linearInt8<D extends FloatDType>(
  x: Tensor<D>,
  weight: Int8Weight,
  options: QuantLinearOptions<D> = {},
): Tensor<D> {
  const op = 'linearInt8';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const [outFeatures, n] = checkInt8Weight(op, weight);
  if (x.shape[x.rank - 1] !== n) {
    throw new QkShapeError({
      op,
      arg: 'x',
      expected: `[..., ${n}] (the in-features of the weight)`,
      got: formatShape(x.shape),
    });
  }
  checkBias(op, x, options.bias, outFeatures);
  if (
    commonDevice(op, { x, qweight: weight.qweight, scales: weight.scales, bias: options.bias }) === 'cuda'
  ) {
    return cudaLinearInt8(x, weight, options.bias, options.out);
  }
  const bias = options.bias === undefined ? undefined : readFloats(options.bias);
  const rows = leadingSize(x.shape);
  const out = new Float32Array(rows * outFeatures);
  matmulRowsByWeightRows(readFloats(x), rows, weight.qweight.data, outFeatures, n, out, {
    bias,
    scale: weight.scales.data,
    act: (v) => v,
  });
  return writeCpuOutput(op, fromFloats(out, [...x.shape.slice(0, -1), outFeatures], x.dtype), options.out);
}

/** Options of {@link linearInt8} and {@link linearInt4}. */
export interface QuantLinearOptions<D extends FloatDType> {
  /** `[out]` in `x`'s dtype, added after the scales. */
  bias?: Tensor<NoInfer<D>>;
  /** Write the result here (shape `[..., out]`, dtype and device of `x`) instead of a new tensor. */
  out?: Tensor;
}

function checkBias<D extends FloatDType>(
  op: string,
  x: Tensor<D>,
  bias: Tensor<D> | undefined,
  outFeatures: number,
): void {
  if (bias === undefined) return;
  checkFloat(op, 'bias', bias);
  checkSameDtype(op, 'bias', bias, x, 'x');
  checkShape(op, 'bias', bias, [outFeatures], 'one bias per output feature');
}

/**
 * Quantizes `weight` (`[out, in]`) to INT4 in groups of `groupSize` (default 128) along `in`:
 * `scale = max|group| / 7`, `q = clamp(round(w / scale), −7, 7)`, packed as described on {@link Int4Weight}.
 * `in` must be a multiple of `groupSize`, and `groupSize` even. A CUDA weight gives a CUDA {@link Int4Weight},
 * bit for bit this result (a non-finite group gets a NaN scale and zero codes there instead of throwing).
 */
export function quantizeInt4(weight: Tensor<FloatDType>, options: { groupSize?: number } = {}): Int4Weight {
  const op = 'quantizeInt4';
  checkWeightMatrix(op, weight);
  const groupSize = checkPositiveInt(op, 'groupSize', options.groupSize ?? DEFAULT_INT4_GROUP);
  if (groupSize % 2 !== 0)
    throw new QkValueError(op, 'groupSize', `must be even (two int4 values per byte), got ${groupSize}.`);
  const [outFeatures, n] = weight.shape as [number, number];
  if (n % groupSize !== 0) {
    throw new QkShapeError({
      op,
      arg: 'weight',
      expected: `[out, in] with in a multiple of groupSize ${groupSize}`,
      got: formatShape(weight.shape),
    });
  }
  if (commonDevice(op, { weight }) === 'cuda') return cudaQuantizeInt4(weight, groupSize);
  const groups = n / groupSize;
  const w = readFloats(weight);
  const q = new Int8Array(w.length);
  const scales = new Float32Array(outFeatures * groups);
  for (let o = 0; o < outFeatures; o++) {
    for (let g = 0; g < groups; g++) {
      const base = o * n + g * groupSize;
      let absmax = 0;
      for (let k = 0; k < groupSize; k++) absmax = Math.max(absmax, Math.abs(w[base + k]!));
      if (!Number.isFinite(absmax))
        throw new QkValueError(op, 'weight', `row ${o} holds a non-finite value; it cannot be quantized.`);
      const scale = Math.fround(absmax / 7);
      scales[o * groups + g] = scale;
      if (scale === 0) continue;
      for (let k = 0; k < groupSize; k++)
        q[base + k] = Math.max(-7, Math.min(7, roundHalfEven(w[base + k]! / scale)));
    }
  }
  return {
    qweight: Tensor.fromStorage(packInt4(q), [outFeatures, n / 2], 'u8'),
    scales: Tensor.fromStorage(scales, [outFeatures, groups], 'f32'),
    groupSize,
  };
}

function checkInt4Weight(op: string, qw: Int4Weight): [number, number, number] {
  if (qw === null || typeof qw !== 'object')
    throw new QkValueError(
      op,
      'weight',
      'must be an Int4Weight { qweight, scales, groupSize } from quantizeInt4.',
    );
  checkDtype(op, 'weight.qweight', qw.qweight, ['u8']);
  checkRank(op, 'weight.qweight', qw.qweight, 2, 'qweight is [out, in/2], two int4 values per byte');
  checkDtype(op, 'weight.scales', qw.scales, ['f32']);
  const groupSize = checkPositiveInt(op, 'weight.groupSize', qw.groupSize);
  const outFeatures = qw.qweight.shape[0]!;
  const n = qw.qweight.shape[1]! * 2;
  if (groupSize % 2 !== 0 || n % groupSize !== 0) {
    throw new QkValueError(
      op,
      'weight.groupSize',
      `(${groupSize}) must be even and divide the ${n} in-features.`,
    );
  }
  checkShape(op, 'weight.scales', qw.scales, [outFeatures, n / groupSize], 'one scale per row and group');
  return [outFeatures, n, groupSize];
}

/** Unpacks and rescales an INT4 weight to floats of `dtype` (default f32), `[out, in]`. */
export function dequantizeInt4<D extends FloatDType = 'f32'>(qw: Int4Weight, dtype?: D): Tensor<D> {
  checkInt4Weight('dequantizeInt4', qw);
  requireCpu('dequantizeInt4', { qweight: qw.qweight, scales: qw.scales });
  return fromFloats(
    dequantizeInt4ToF64('dequantizeInt4', qw),
    [qw.qweight.shape[0]!, qw.qweight.shape[1]! * 2],
    (dtype ?? 'f32') as D,
  );
}

/** Dequantized values in float64, where every `q · scale` product is exact. */
function dequantizeInt4ToF64(op: string, qw: Int4Weight): Float64Array {
  const [outFeatures, n, groupSize] = checkInt4Weight(op, qw);
  const q = unpackInt4(qw.qweight.data);
  const s = qw.scales.data;
  const groups = n / groupSize;
  const out = new Float64Array(q.length);
  for (let o = 0; o < outFeatures; o++) {
    for (let k = 0; k < n; k++) out[o * n + k] = q[o * n + k]! * s[o * groups + Math.floor(k / groupSize)]!;
  }
  return out;
}

/**
 * Weight-only INT4 linear: `y[..., o] = Σ_k x[..., k] · q[o, k] · scale[o, ⌊k/groupSize⌋] + bias[o]`.
 * `x` is `[..., in]`; returns `[..., out]` in `x`'s dtype. Weights are dequantized in float64 (each
 * `q · scale` is exact there), then summed in float64 and rounded once.
 */
export function linearInt4<D extends FloatDType>(
  x: Tensor<D>,
  weight: Int4Weight,
  options: QuantLinearOptions<D> = {},
): Tensor<D> {
  const op = 'linearInt4';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const [outFeatures, n] = checkInt4Weight(op, weight);
  if (x.shape[x.rank - 1] !== n) {
    throw new QkShapeError({
      op,
      arg: 'x',
      expected: `[..., ${n}] (the in-features of the weight)`,
      got: formatShape(x.shape),
    });
  }
  checkBias(op, x, options.bias, outFeatures);
  if (
    commonDevice(op, { x, qweight: weight.qweight, scales: weight.scales, bias: options.bias }) === 'cuda'
  ) {
    return cudaLinearInt4(x, weight, options.bias, options.out);
  }
  const bias = options.bias === undefined ? undefined : readFloats(options.bias);
  const rows = leadingSize(x.shape);
  const out = new Float32Array(rows * outFeatures);
  const w = dequantizeInt4ToF64(op, weight);
  matmulRowsByWeightRows(readFloats(x), rows, w, outFeatures, n, out, { bias, act: (v) => v });
  return writeCpuOutput(op, fromFloats(out, [...x.shape.slice(0, -1), outFeatures], x.dtype), options.out);
}
