/**
 * Random Qwen3 weights with HF's initialisation (`normal(0, 0.02)` for every matrix, the embedding included;
 * RMSNorm weights all ones), deterministic per (seed, tensor name) and fast enough for real shapes: Qwen3-0.6B's
 * 596M parameters take a second or two.
 *
 * Speed comes from two choices. The uniform source is xoshiro128** (four 32-bit words of state, a handful of
 * integer ops per draw). The normal transform is an inverse-CDF lookup: each 16-bit half of a draw indexes a
 * table of the 65536 normal quantiles at (k + ½) / 65536, pre-scaled by 0.02 and pre-encoded in the target
 * dtype, so one element costs half a draw and one load. That is a faithful normal up to ±4.2σ, finer than bf16
 * can tell apart, which is all random weights for testing engines need.
 */
import { type Device, type FloatDType, f32ToBf16Bits, f32ToF16Bits, QkValueError, Tensor } from '@qk/ops';
import { QkAbortError } from '../errors.js';
import type { Qwen3Config, Qwen3Weights } from '../types.js';
import { convertBytes } from './convert.js';
import { assembleWeights, type ExpectedTensor, expectedTensors } from './layout.js';
import type { LoadProgress } from './load.js';

/** HF's `initializer_range` for Qwen3. */
export const INIT_STD = 0.02;

/** One generated tensor: HF name, shape, and its little-endian bytes in `dtype`. */
export interface RandomTensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: FloatDType;
  readonly bytes: Uint8Array;
}

/** Options of {@link randomTensors}. */
export interface RandomTensorsOptions<D extends FloatDType = FloatDType> {
  /** Non-negative safe integer; the same seed and name give the same tensor on every machine. */
  readonly seed: number;
  readonly dtype: D;
}

/** Acklam's rational approximation of the inverse normal CDF (relative error below 1.2e-9). */
function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716,
    2.506628277459239,
  ];
  const b = [
    -54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number) =>
    (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) /
    ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

let quantiles: Float64Array | undefined;
const encodedTables: Partial<Record<FloatDType, Float32Array | Uint16Array>> = {};

/** The 65536 normal quantiles, mirrored so the table is exactly symmetric (mean 0 over all entries). */
function normalQuantiles(): Float64Array {
  if (quantiles !== undefined) return quantiles;
  const q = new Float64Array(65536);
  for (let k = 0; k < 32768; k++) {
    const z = normalQuantile((k + 0.5) / 65536);
    q[k] = z;
    q[65535 - k] = -z;
  }
  return (quantiles = q);
}

/** Quantiles × {@link INIT_STD}, encoded in `dtype` storage. */
function encodedTable(dtype: FloatDType): Float32Array | Uint16Array {
  const cached = encodedTables[dtype];
  if (cached !== undefined) return cached;
  const q = normalQuantiles();
  const out = dtype === 'f32' ? new Float32Array(65536) : new Uint16Array(65536);
  const encode = dtype === 'f32' ? Math.fround : dtype === 'bf16' ? f32ToBf16Bits : f32ToF16Bits;
  for (let k = 0; k < 65536; k++) out[k] = encode(INIT_STD * q[k]!);
  return (encodedTables[dtype] = out);
}

/** FNV-1a over UTF-16 code units, with a chosen offset basis so two bases give two independent-enough words. */
function fnv1a(text: string, basis: number): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** xoshiro128** state for (seed, name), expanded from two hashes with splitmix32 (never all zero). */
function seedState(seed: number, name: string): Uint32Array {
  const key = `${seed}\u0000${name}`;
  const state = new Uint32Array(4);
  let x = fnv1a(key, 0x811c9dc5);
  let y = fnv1a(key, 0x2f6b3e1d);
  for (let i = 0; i < 4; i++) {
    let z = i < 2 ? (x = (x + 0x9e3779b9) >>> 0) : (y = (y + 0x9e3779b9) >>> 0);
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    state[i] = (z ^ (z >>> 16)) >>> 0;
  }
  if ((state[0]! | state[1]! | state[2]! | state[3]!) === 0) state[0] = 1;
  return state;
}

/** Fills `out` from the table, two elements per xoshiro128** draw (kept in locals: this is the hot loop). */
function fillNormal(
  out: Float32Array | Uint16Array,
  table: Float32Array | Uint16Array,
  state: Uint32Array,
): void {
  let s0 = state[0]!;
  let s1 = state[1]!;
  let s2 = state[2]!;
  let s3 = state[3]!;
  const n = out.length;
  for (let i = 0; i < n; i += 2) {
    const m = Math.imul(s1, 5);
    const r = Math.imul((m << 7) | (m >>> 25), 9) >>> 0;
    const t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = (s3 << 11) | (s3 >>> 21);
    out[i] = table[r & 0xffff]!;
    out[i + 1] = table[r >>> 16]!; // past the end on the last odd step: a typed array ignores it
  }
}

function checkSeed(seed: number, op: string): void {
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new QkValueError(op, 'seed', `must be a non-negative safe integer, got ${seed}.`);
  }
}

/**
 * The bytes of one random tensor: ones for 1-D tensors (every 1-D Qwen3 weight is an RMSNorm scale),
 * `normal(0, 0.02)` otherwise; the same for the same (seed, name, shape, dtype) everywhere.
 */
export function randomTensorBytes(tensor: ExpectedTensor, options: RandomTensorsOptions): Uint8Array {
  checkSeed(options.seed, 'randomTensorBytes');
  const n = tensor.shape.reduce((a, b) => a * b, 1);
  const out = options.dtype === 'f32' ? new Float32Array(n) : new Uint16Array(n);
  if (tensor.shape.length === 1)
    out.fill(options.dtype === 'f32' ? 1 : options.dtype === 'bf16' ? 0x3f80 : 0x3c00);
  else fillNormal(out, encodedTable(options.dtype), seedState(options.seed, tensor.name));
  return new Uint8Array(out.buffer);
}

/**
 * Every tensor of a random checkpoint for `config`, one at a time (in `save_pretrained` order), so a caller can
 * write or upload each and drop it before the next is made.
 */
export function* randomTensors<D extends FloatDType>(
  config: Qwen3Config,
  options: RandomTensorsOptions<D>,
): Generator<RandomTensor> {
  checkSeed(options.seed, 'randomTensors');
  for (const t of expectedTensors(config)) {
    yield { name: t.name, shape: t.shape, dtype: options.dtype, bytes: randomTensorBytes(t, options) };
  }
}

/** Options of {@link randomWeights}. */
export interface RandomWeightsOptions<D extends FloatDType> extends RandomTensorsOptions<D> {
  /** Where the tensors live (default `'cpu'`); CUDA tensors are uploaded one at a time. */
  readonly device?: Device;
  readonly onProgress?: (progress: LoadProgress) => void;
  /** Checked between tensors; on abort the tensors made so far are disposed and `QkAbortError` is thrown. */
  readonly signal?: AbortSignal;
}

/** Random weights for `config` built in memory (no files), as {@link loadWeights} would return them. */
export async function randomWeights<D extends FloatDType>(
  config: Qwen3Config,
  options: RandomWeightsOptions<D>,
): Promise<Qwen3Weights<D>> {
  const { dtype, device = 'cpu', onProgress, signal } = options;
  checkSeed(options.seed, 'randomWeights');
  const expected = expectedTensors(config);
  const totalBytes =
    expected.reduce((sum, t) => sum + t.shape.reduce((a, b) => a * b, 1), 0) * bytesOf(dtype);
  const made = new Map<string, Tensor<D>>();
  let loadedBytes = 0;
  try {
    for (const t of expected) {
      // Yield so that an abort (or anything else queued) gets a turn between tensors.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (signal?.aborted) throw new QkAbortError('making random weights', signal.reason);
      const bytes = randomTensorBytes(t, options);
      const host = Tensor.fromStorage(convertBytes(bytes, dtype, dtype), t.shape, dtype);
      if (device === 'cpu') made.set(t.name, host);
      else {
        try {
          made.set(t.name, host.to(device));
        } finally {
          host.dispose();
        }
      }
      loadedBytes += bytes.byteLength;
      onProgress?.({ loadedBytes, totalBytes, tensor: t.name });
    }
    return assembleWeights(config, (name) => made.get(name)!);
  } catch (e) {
    for (const t of made.values()) t.dispose();
    throw e;
  }
}

function bytesOf(dtype: FloatDType): number {
  return dtype === 'f32' ? 4 : 2;
}
