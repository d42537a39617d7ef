/**
 * The sampling controls that act on a row of logits before `sample` draws from it (repetition, presence and
 * frequency penalties, an additive bias, an allowed-token mask, min-p), the token counts the penalties read, and
 * the log-probabilities a generation reports. Each op is defined here in float64 and has a CUDA path
 * (packages/cuda-core/csrc/kernels/logit_controls.cu) that follows the same rule operation for operation.
 */
import { checkDtype, checkFloat, checkNoOverlap, checkRank, checkShape, commonDevice } from '../check.js';
import type { ResolvedLogitControls, TokenLogprobs } from '../core/logit-controls.js';
import { cudaAddTokenCounts, cudaApplyLogitControls, cudaTokenLogprobs } from '../cuda/logit-controls.js';
import { QkValueError } from '../errors.js';
import { readFloats, writeCpuOutput } from '../io.js';
import { Tensor } from '../tensor.js';

export type { ResolvedLogitControls, TokenLogprobs } from '../core/logit-controls.js';

/** Words of an allowed-token or seen-token bitset over `vocab` tokens: token `t` is bit `t & 31` of word `t >>> 5`. */
export function bitsetWords(vocab: number): number {
  return Math.ceil(vocab / 32);
}

/** The most alternatives {@link tokenLogprobs} reports per row (OpenAI's `top_logprobs` limit). */
export const MAX_TOP_LOGPROBS = 20;

/** Options of {@link applyLogitControls}. Every tensor is per row: its leading axis matches the logits' rows. */
export interface LogitControls {
  /**
   * HF's repetition penalty (> 0; 1, the default, is off): a token seen in the prompt or the generated text has its
   * logit divided by it when positive and multiplied by it otherwise.
   */
  repetitionPenalty?: number;
  /** Subtracted once from the logit of every token generated at least once (OpenAI's; default 0). */
  presencePenalty?: number;
  /** Subtracted per occurrence from the logit of every generated token (OpenAI's; default 0). */
  frequencyPenalty?: number;
  /** i32 `[rows, vocab]`: occurrences of each token in the generated text. Absent: nothing generated yet. */
  counts?: Tensor;
  /** i32 `[rows, bitsetWords(vocab)]`: bitset of the tokens in the prompt (the repetition penalty reads it). */
  promptTokens?: Tensor;
  /** f32 `[rows, vocab]`: added to the logits after the penalties. */
  bias?: Tensor;
  /** i32 `[rows, bitsetWords(vocab)]`: bitset of the allowed tokens; the others become −∞. */
  mask?: Tensor;
  /**
   * Min-p in [0, 1] (0, the default, is off): tokens whose probability at `temperature` is below `minP` times the
   * most likely one's become −∞, i.e. those with `(x − max) / temperature < ln(minP)`. Ignored at temperature 0.
   */
  minP?: number;
  /** The temperature min-p measures probabilities at (default 1); 0 turns min-p off (greedy keeps the argmax). */
  temperature?: number;
  /** Write the result here: an f32 tensor shaped like the logits, on their device. */
  out?: Tensor;
}

function checkControlTensor(
  op: string,
  arg: string,
  t: Tensor | undefined,
  dtype: 'i32' | 'f32',
  shape: readonly number[],
): void {
  if (t === undefined) return;
  checkDtype(op, arg, t, [dtype]);
  checkShape(op, arg, t, shape, 'one row per row of the logits');
}

/** Checks the scalar options of {@link applyLogitControls}. */
export function resolveLogitControls(op: string, c: LogitControls): ResolvedLogitControls {
  const number = (
    arg: keyof LogitControls,
    fallback: number,
    valid: (x: number) => boolean,
    range: string,
  ) => {
    const v = c[arg] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || !valid(v)) {
      throw new QkValueError(op, arg, `must be ${range}, got ${String(v)}.`);
    }
    return v;
  };
  const repetitionPenalty = number('repetitionPenalty', 1, (x) => x > 0, 'a finite number > 0 (1 is off)');
  const presencePenalty = number('presencePenalty', 0, () => true, 'a finite number (0 is off)');
  const frequencyPenalty = number('frequencyPenalty', 0, () => true, 'a finite number (0 is off)');
  const minP = number('minP', 0, (x) => x >= 0 && x <= 1, 'a number in [0, 1] (0 is off)');
  const temperature = number('temperature', 1, (x) => x >= 0, 'a finite number >= 0');
  const logMinP = minP > 0 && temperature > 0 ? Math.log(minP) : -Infinity;
  return { repetitionPenalty, presencePenalty, frequencyPenalty, logMinP, temperature };
}

/**
 * Applies the sampling controls to `logits` (`[rows, vocab]`, any float dtype) → f32 `[rows, vocab]`, for `sample`
 * (or `argmax`) to draw from. Per token `t` of a row, in float64, rounded to f32 once at the end:
 *
 * 1. `x = logits[t]`; with `c = counts[t]` (0 without counts) and `seen = c > 0 or t in promptTokens`:
 * 2. repetition: if `seen`, `x = x > 0 ? x / repetitionPenalty : x · repetitionPenalty`;
 * 3. `x = x − frequencyPenalty · c`, then `x = x − presencePenalty` if `c > 0`;
 * 4. `x = x + bias[t]`, then rounded to f32;
 * 5. a token outside `mask` becomes −∞;
 * 6. min-p: with `max` the row's largest value after 5, a token with `(x − max) / temperature < ln(minP)` becomes −∞.
 *
 * NaN and +∞ logits stay as they are, masked or not, so `sample` still refuses the row: a broken model never hides
 * behind a mask.
 *
 * @throws QkValueError for a control out of range; QkShapeError / QkDtypeError for a control tensor of the wrong
 * shape or dtype.
 */
export function applyLogitControls(logits: Tensor, controls: LogitControls = {}): Tensor<'f32'> {
  const op = 'applyLogitControls';
  checkFloat(op, 'logits', logits);
  checkRank(op, 'logits', logits, 2, 'pass [rows, vocab]');
  const [rows, vocab] = logits.shape as [number, number];
  if (vocab === 0) throw new QkValueError(op, 'logits', 'has an empty vocabulary axis.');
  const words = bitsetWords(vocab);
  const { counts, promptTokens, bias, mask } = controls;
  checkControlTensor(op, 'counts', counts, 'i32', [rows, vocab]);
  checkControlTensor(op, 'promptTokens', promptTokens, 'i32', [rows, words]);
  checkControlTensor(op, 'bias', bias, 'f32', [rows, vocab]);
  checkControlTensor(op, 'mask', mask, 'i32', [rows, words]);
  const r = resolveLogitControls(op, controls);
  const device = commonDevice(op, { logits, counts, promptTokens, bias, mask, out: controls.out });
  if (controls.out !== undefined) {
    checkNoOverlap(
      op,
      'out',
      controls.out,
      { counts, promptTokens, bias, mask },
      'the controls are read while the output is written; pass a separate f32 tensor.',
    );
  }
  if (device === 'cuda') {
    return cudaApplyLogitControls(logits, { counts, promptTokens, bias, mask }, r, controls.out);
  }
  const x = readFloats(logits);
  const out = new Float32Array(rows * vocab);
  for (let row = 0; row < rows; row++) {
    const base = row * vocab;
    const wordBase = row * words;
    let max = -Infinity;
    for (let t = 0; t < vocab; t++) {
      let v = x[base + t]!;
      if (!Number.isNaN(v) && v !== Infinity) {
        const c = counts === undefined ? 0 : (counts.data as Int32Array)[base + t]!;
        const inPrompt =
          promptTokens !== undefined &&
          (((promptTokens.data as Int32Array)[wordBase + (t >>> 5)]! >>> (t & 31)) & 1) === 1;
        if (r.repetitionPenalty !== 1 && (c > 0 || inPrompt)) {
          v = v > 0 ? v / r.repetitionPenalty : v * r.repetitionPenalty;
        }
        v = v - r.frequencyPenalty * c;
        if (c > 0) v = v - r.presencePenalty;
        if (bias !== undefined) v = v + (bias.data as Float32Array)[base + t]!;
        v = Math.fround(v);
        if (
          mask !== undefined &&
          (((mask.data as Int32Array)[wordBase + (t >>> 5)]! >>> (t & 31)) & 1) === 0
        ) {
          v = -Infinity;
        }
        if (v > max) max = v;
      }
      out[base + t] = v;
    }
    if (r.logMinP === -Infinity || max === -Infinity) continue;
    for (let t = 0; t < vocab; t++) {
      const v = out[base + t]!;
      // NaN compares false and stays: the sampler must still see it.
      if ((v - max) / r.temperature < r.logMinP) out[base + t] = -Infinity;
    }
  }
  return writeCpuOutput(op, Tensor.fromStorage(out, [rows, vocab], 'f32'), controls.out);
}

/**
 * Adds one occurrence of `ids[r]` to row `r` of `counts` (i32 `[rows, vocab]`, updated in place): what a generation
 * does after each drawn token so the penalties of the next step see it. Ids outside `[0, vocab)` (the −1 of a row
 * `sample` refused) are skipped. On CUDA this stays on the device: the drawn ids need not come back first.
 */
export function addTokenCounts(counts: Tensor, ids: Tensor): void {
  const op = 'addTokenCounts';
  checkDtype(op, 'counts', counts, ['i32']);
  checkRank(op, 'counts', counts, 2, 'pass [rows, vocab]');
  checkDtype(op, 'ids', ids, ['i32']);
  const [rows, vocab] = counts.shape as [number, number];
  checkShape(op, 'ids', ids, [rows], 'one id per row of counts');
  if (commonDevice(op, { counts, ids }) === 'cuda') {
    cudaAddTokenCounts(counts, ids);
    return;
  }
  const c = counts.data as Int32Array;
  const id = ids.data as Int32Array;
  for (let r = 0; r < rows; r++) {
    const t = id[r]!;
    if (t >= 0 && t < vocab) c[r * vocab + t]!++;
  }
}

/** Options of {@link tokenLogprobs}. */
export interface TokenLogprobsOptions {
  /** Alternatives per row, 0–{@link MAX_TOP_LOGPROBS} and at most the vocabulary (default 0). */
  topN?: number;
}

/**
 * The log-probability of `ids[r]` (i32 `[rows]`) under `softmax(logits[r])` (`[rows, vocab]`, any float dtype), and
 * the `topN` most likely tokens with theirs. Computed as `x − (max + ln Σ exp(x − max))` in float64, rounded to f32.
 * −∞ logits have probability 0 (log-probability −∞).
 *
 * @throws QkValueError when a row holds NaN or +∞, or is entirely −∞ (no distribution to report), or an id lies
 * outside the vocabulary.
 */
export function tokenLogprobs(
  logits: Tensor,
  ids: Tensor,
  options: TokenLogprobsOptions = {},
): TokenLogprobs {
  const op = 'tokenLogprobs';
  checkFloat(op, 'logits', logits);
  checkRank(op, 'logits', logits, 2, 'pass [rows, vocab]');
  const [rows, vocab] = logits.shape as [number, number];
  checkDtype(op, 'ids', ids, ['i32']);
  checkShape(op, 'ids', ids, [rows], 'one id per row of the logits');
  const topN = options.topN ?? 0;
  if (!Number.isSafeInteger(topN) || topN < 0 || topN > Math.min(MAX_TOP_LOGPROBS, vocab)) {
    throw new QkValueError(
      op,
      'topN',
      `must be an integer in [0, ${Math.min(MAX_TOP_LOGPROBS, vocab)}] (at most ${MAX_TOP_LOGPROBS} and the vocabulary), got ${String(topN)}.`,
    );
  }
  if (commonDevice(op, { logits, ids }) === 'cuda') return cudaTokenLogprobs(logits, ids, topN);
  const x = readFloats(logits);
  const id = ids.data as Int32Array;
  const logprobs = new Float32Array(rows);
  const topIds = new Int32Array(rows * topN);
  const topLogprobs = new Float32Array(rows * topN);
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    const lse = rowLogSumExp(op, x, base, vocab, r);
    const t = id[r]!;
    if (t < 0 || t >= vocab) {
      throw new QkValueError(op, 'ids', `holds ${t} in row ${r}, outside the vocabulary [0, ${vocab}).`);
    }
    logprobs[r] = x[base + t]! - lse;
    const top = topIndices(x, base, vocab, topN);
    for (let j = 0; j < topN; j++) {
      topIds[r * topN + j] = top[j]!;
      topLogprobs[r * topN + j] = x[base + top[j]!]! - lse;
    }
  }
  return {
    logprobs: Tensor.fromStorage(logprobs, [rows], 'f32'),
    topIds: Tensor.fromStorage(topIds, [rows, topN], 'i32'),
    topLogprobs: Tensor.fromStorage(topLogprobs, [rows, topN], 'f32'),
  };
}

/** `max + ln Σ exp(x − max)` over one row, in float64; refuses NaN, +∞ and rows without a finite value. */
function rowLogSumExp(op: string, x: Float32Array, base: number, n: number, row: number): number {
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = x[base + i]!;
    if (Number.isNaN(v) || v === Infinity) {
      throw new QkValueError(
        op,
        'logits',
        `row ${row} holds ${v} at index ${i}; logits must be finite or -Infinity.`,
      );
    }
    if (v > max) max = v;
  }
  if (max === -Infinity) {
    throw new QkValueError(
      op,
      'logits',
      `row ${row} is entirely -Infinity: there is no distribution to report.`,
    );
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(x[base + i]! - max);
  return max + Math.log(sum);
}

/** The `k` largest of one row in (value descending, index ascending) order. */
function topIndices(x: Float32Array, base: number, n: number, k: number): number[] {
  const top: number[] = [];
  for (let i = 0; i < n && k > 0; i++) {
    const v = x[base + i]!;
    if (top.length === k && !(v > x[base + top[k - 1]!]!)) continue;
    let j = top.length < k ? top.length : k - 1;
    top[j] = i;
    // Strictly greater moves up: an equal value keeps the lower index ahead of it.
    while (j > 0 && x[base + top[j - 1]!]! < v) {
      top[j] = top[j - 1]!;
      top[j - 1] = i;
      j--;
    }
  }
  return top;
}
