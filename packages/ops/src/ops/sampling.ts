import { checkFinite, checkFloat, checkRank, commonDevice } from '../check.js';
import { cudaArgmax, cudaSample } from '../cuda/sampling.js';
import { QkValueError } from '../errors.js';
import { readFloats, writeCpuOutput } from '../io.js';
import { Rng } from '../random.js';
import { Tensor } from '../tensor.js';

/**
 * Index of the largest element of each row (last axis), as `i32` of shape `x.shape[:-1]`. Ties go to the lowest
 * index; NaN counts as larger than everything (the first NaN wins), matching `torch.argmax`. `out` (an `i32`
 * tensor of that shape on `x`'s device) receives the result instead of a new tensor.
 */
export function argmax(x: Tensor, options: { out?: Tensor } = {}): Tensor<'i32'> {
  const op = 'argmax';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const n = x.shape[x.rank - 1]!;
  if (n === 0) throw new QkValueError(op, 'x', 'has an empty last axis: there is no maximum to find.');
  if (commonDevice(op, { x }) === 'cuda') return cudaArgmax(x, options.out);
  const src = readFloats(x);
  const rows = x.size / n;
  const out = new Int32Array(rows);
  for (let r = 0; r < rows; r++) out[r] = argmaxRow(src, r * n, n);
  return writeCpuOutput(op, Tensor.fromStorage(out, x.shape.slice(0, -1), 'i32'), options.out);
}

function argmaxRow(src: Float32Array, base: number, n: number): number {
  let best = 0;
  let bestValue = src[base]!;
  if (Number.isNaN(bestValue)) return 0;
  for (let i = 1; i < n; i++) {
    const v = src[base + i]!;
    if (Number.isNaN(v)) return i;
    if (v > bestValue) {
      bestValue = v;
      best = i;
    }
  }
  return best;
}

/** Options of {@link sample}. */
export interface SampleOptions {
  /** Divides the logits. `0` means greedy (argmax). Default `1`. */
  temperature?: number;
  /** Keep only the k most likely tokens; `0` (default) keeps all. */
  topK?: number;
  /** Keep the smallest set of most likely tokens whose probability reaches p; `1` (default) keeps all. */
  topP?: number;
  /** Seed of a fresh PCG32 stream (default 0). Ignored when `rng` is given. */
  seed?: number | bigint;
  /** Continue this generator's stream: one uniform draw per row. */
  rng?: Rng;
  /** Write the ids here (an `i32` tensor of shape `logits.shape[:-1]` on `logits`' device). */
  out?: Tensor;
  /**
   * CUDA only (ignored on the CPU): scratch of the sampling kernels, a CUDA `u8` tensor of at least
   * `sampleWorkspaceBytes(rows, vocab)` bytes. By default each call allocates and frees one through the caching
   * allocator; CUDA-graph captures must pass a persistent one.
   */
  workspace?: Tensor<'u8'>;
  /**
   * CUDA only: read the ids back after the launch and throw `QkValueError` for a row the kernel refused (NaN or
   * +∞ logits, or everything −∞), which it marks with id −1. Default true; false keeps the call asynchronous (for
   * CUDA-graph capture), and a refused row then yields −1.
   */
  checkIds?: boolean;
}

/**
 * Draws one token id per row of `logits` (`[..., vocab]`) → `i32` of shape `logits.shape[:-1]`.
 *
 * Per row: `z = logits / temperature`; candidates ordered by descending z (ties: lower index first); keep the
 * first `topK` (if set); softmax over those; keep the shortest prefix whose probability sum reaches `topP`
 * (at least one token); then draw `u ~ U[0, 1)` and return the first candidate whose cumulative renormalised
 * probability exceeds `u`. `temperature = 0` returns the argmax without drawing. NaN or +∞ logits, and rows
 * masked entirely (all −∞), are refused.
 *
 * On CUDA the uniforms come from the same stream, one per row in row order (drawn before the launch, so a
 * refused call still advances `rng`), and the kernel selects by the same rule without sorting: its cumulative
 * sums are exact fixed-point sums of float64 weights, so a drawn id can differ from the CPU's only when `u` falls
 * within ~1e-12 of a candidate boundary.
 */
export function sample(logits: Tensor, options: SampleOptions = {}): Tensor<'i32'> {
  const op = 'sample';
  checkFloat(op, 'logits', logits);
  checkRank(op, 'logits', logits, { min: 1 });
  const temperature = checkFinite(op, 'temperature', options.temperature ?? 1);
  if (temperature < 0)
    throw new QkValueError(op, 'temperature', `must be >= 0 (0 means greedy), got ${temperature}.`);
  const topK = options.topK ?? 0;
  if (!Number.isSafeInteger(topK) || topK < 0)
    throw new QkValueError(op, 'topK', `must be a non-negative integer (0 disables it), got ${topK}.`);
  const topP = checkFinite(op, 'topP', options.topP ?? 1);
  if (!(topP > 0 && topP <= 1)) throw new QkValueError(op, 'topP', `must lie in (0, 1], got ${topP}.`);
  const vocab = logits.shape[logits.rank - 1]!;
  if (vocab === 0) throw new QkValueError(op, 'logits', 'has an empty vocabulary axis.');
  if (commonDevice(op, { logits }) === 'cuda') {
    let uniforms: Float64Array | null = null;
    if (temperature > 0) {
      const rng = options.rng ?? new Rng(options.seed ?? 0);
      uniforms = new Float64Array(logits.size / vocab);
      for (let r = 0; r < uniforms.length; r++) uniforms[r] = rng.nextFloat();
    }
    const params = { temperature, topK, topP, uniforms, checkIds: options.checkIds ?? true };
    return cudaSample(logits, params, options.out, options.workspace);
  }
  const src = readFloats(logits);
  for (let i = 0; i < src.length; i++) {
    const v = src[i]!;
    if (Number.isNaN(v) || v === Infinity) {
      throw new QkValueError(
        op,
        'logits',
        `holds ${v} at flat index ${i}; logits must be finite or -Infinity (masked).`,
      );
    }
  }
  const rows = logits.size / vocab;
  const out = new Int32Array(rows);
  if (temperature === 0) {
    for (let r = 0; r < rows; r++) {
      out[r] = argmaxRow(src, r * vocab, vocab);
      if (src[r * vocab + out[r]!] === -Infinity) {
        throw new QkValueError(op, 'logits', `row ${r} is entirely -Infinity: every token is masked.`);
      }
    }
    return writeCpuOutput(op, Tensor.fromStorage(out, logits.shape.slice(0, -1), 'i32'), options.out);
  }
  const rng = options.rng ?? new Rng(options.seed ?? 0);
  const order = new Int32Array(vocab);
  const probs = new Float64Array(vocab);
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    for (let i = 0; i < vocab; i++) order[i] = i;
    order.sort((a, b) => src[base + b]! - src[base + a]! || a - b);
    const kept = topK > 0 ? Math.min(topK, vocab) : vocab;
    const max = src[base + order[0]!]!;
    if (max === -Infinity)
      throw new QkValueError(op, 'logits', `row ${r} is entirely -Infinity: every token is masked.`);
    let sum = 0;
    for (let i = 0; i < kept; i++) {
      // Subtract before dividing: z = x/T alone overflows to ±∞ for a tiny T (NaN probabilities).
      const p = Math.exp((src[base + order[i]!]! - max) / temperature);
      probs[i] = p;
      sum += p;
    }
    let nucleus = kept;
    if (topP < 1) {
      let cumulative = 0;
      for (let i = 0; i < kept; i++) {
        cumulative += probs[i]! / sum;
        if (cumulative >= topP) {
          nucleus = i + 1;
          break;
        }
      }
    }
    let total = 0;
    for (let i = 0; i < nucleus; i++) total += probs[i]!;
    const target = rng.nextFloat() * total;
    let chosen = order[nucleus - 1]!;
    let cumulative = 0;
    for (let i = 0; i < nucleus; i++) {
      cumulative += probs[i]!;
      if (cumulative > target) {
        chosen = order[i]!;
        break;
      }
    }
    out[r] = chosen;
  }
  return writeCpuOutput(op, Tensor.fromStorage(out, logits.shape.slice(0, -1), 'i32'), options.out);
}
