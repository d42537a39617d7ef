/**
 * Picking a token from a row of host logits, as the `sample` op defines it, fast enough to run every decode step
 * of the cpu engine (and the fallback that masks token ids the tokenizer cannot print).
 */
import {
  applyLogitControls,
  argmax,
  bitsetWords,
  QkValueError,
  sample,
  Tensor,
  tokenLogprobs,
} from '@qk/ops';
import type { SampledToken, SamplingParams, StepControls, TokenHistory } from '../types.js';
import { stepSeed } from './common.js';

/**
 * Index of the `k` largest logits ordered by (value descending, index ascending) as `sample` orders its
 * candidates, returned in ascending index order. Refuses NaN and +∞ as `sample` does.
 */
function topKIndices(logits: Float32Array, k: number): Int32Array {
  const values = new Float64Array(k).fill(-Infinity);
  const indices = new Int32Array(k).fill(-1);
  let count = 0;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (Number.isNaN(v) || v === Infinity) {
      throw new QkValueError(
        'sample',
        'logits',
        `holds ${v} at flat index ${i}; logits must be finite or -Infinity (masked).`,
      );
    }
    // Strictly greater: among equal values the earlier (lower) index already holds its place.
    if (count === k && !(v > values[k - 1]!)) continue;
    let j = count === k ? k - 1 : count++;
    while (j > 0 && values[j - 1]! < v) {
      values[j] = values[j - 1]!;
      indices[j] = indices[j - 1]!;
      j--;
    }
    values[j] = v;
    indices[j] = i;
  }
  return indices.subarray(0, count).sort();
}

/** Below this fraction of the vocabulary a top-k filter runs before `sample`, which otherwise sorts every logit. */
const TOP_K_PREFILTER_FRACTION = 1 / 8;

/**
 * Picks the next token from one row of logits: argmax for temperature 0, else `sample` seeded by {@link stepSeed}.
 * With a small `topK` only the k candidates reach `sample`; its choice is the same as on the whole row (same
 * candidate order, probabilities and uniform draw), without sorting the vocabulary every step.
 */
export function pickToken(logits: Float32Array, sampling: SamplingParams, step: number): number {
  const row = Tensor.fromStorage(logits, [logits.length], 'f32');
  if (sampling.temperature === 0) return argmax(row).item();
  const options = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    seed: stepSeed(sampling.seed, step),
  };
  const { topK } = sampling;
  if (topK > 0 && topK < logits.length * TOP_K_PREFILTER_FRACTION) {
    const candidates = topKIndices(logits, topK);
    const sub = Float32Array.from(candidates, (i) => logits[i]!);
    const chosen = sample(Tensor.fromStorage(sub, [sub.length], 'f32'), options).item();
    return candidates[chosen]!;
  }
  return sample(row, { ...options, topK }).item();
}

/** Whether `s` sets a control that only `Engine.choose` applies (a penalty, min-p or a logit bias). */
export function hasLogitControls(s: SamplingParams): boolean {
  return hasPenalties(s) || (s.minP ?? 0) !== 0 || (s.logitBias?.size ?? 0) > 0;
}

/** Whether `s` sets a penalty (presence, frequency or repetition), which reads the generation's history. */
export function hasPenalties(
  s: Pick<SamplingParams, 'presencePenalty' | 'frequencyPenalty' | 'repetitionPenalty'>,
): boolean {
  return (
    (s.presencePenalty ?? 0) !== 0 || (s.frequencyPenalty ?? 0) !== 0 || (s.repetitionPenalty ?? 1) !== 1
  );
}

/** Host copies of a history: dense counts of the generated ids and the prompt's bitset, over `vocab` tokens. */
interface HostHistory {
  readonly vocab: number;
  /** Generated ids already in `counts`. */
  counted: number;
  readonly counts: Int32Array;
  readonly promptTokens: Int32Array;
}

const hostHistories = new WeakMap<TokenHistory, HostHistory>();

/**
 * The counts and prompt bitset of `history` over `vocab` tokens, built on the first call for a history and brought
 * up to date from the ids generated since (a history only grows while its generation runs).
 */
export function historyArrays(history: TokenHistory, vocab: number): HostHistory {
  let h = hostHistories.get(history);
  if (h === undefined || h.vocab !== vocab || h.counted > history.generated.length) {
    const promptTokens = new Int32Array(bitsetWords(vocab));
    for (const t of history.prompt) if (t >= 0 && t < vocab) promptTokens[t >>> 5]! |= 1 << (t & 31);
    h = { vocab, counted: 0, counts: new Int32Array(vocab), promptTokens };
    hostHistories.set(history, h);
  }
  for (; h.counted < history.generated.length; h.counted++) {
    const t = history.generated[h.counted]!;
    if (t >= 0 && t < vocab) h.counts[t]!++;
  }
  return h;
}

const denseBiases = new WeakMap<ReadonlyMap<number, number>, Float32Array>();

/** `bias` as a dense f32 row over `vocab` tokens (ids outside it are dropped), cached per map. */
export function denseBias(bias: ReadonlyMap<number, number>, vocab: number): Float32Array {
  let dense = denseBiases.get(bias);
  if (dense === undefined || dense.length !== vocab) {
    dense = new Float32Array(vocab);
    for (const [t, v] of bias) if (t >= 0 && t < vocab) dense[t] = v;
    denseBiases.set(bias, dense);
  }
  return dense;
}

/**
 * `mask` as i32 words over `vocab` tokens with every token at or past `limit` disallowed (the padding rows the
 * tokenizer cannot print); words the mask lacks allow nothing. Returns the words and whether any token is allowed.
 */
export function maskWordsFor(
  mask: Uint32Array,
  vocab: number,
  limit: number,
): { words: Int32Array; any: boolean } {
  const words = new Int32Array(bitsetWords(vocab));
  const full = Math.min(limit, vocab) >>> 5;
  words.set(new Int32Array(mask.buffer, mask.byteOffset, Math.min(mask.length, full)));
  const rest = Math.min(limit, vocab) & 31;
  if (rest !== 0 && full < mask.length) words[full] = mask[full]! & ((1 << rest) - 1);
  return { words, any: words.some((w) => w !== 0) };
}

/**
 * The reference of a step with controls: `logits` (one row, f32 over the vocabulary) through `applyLogitControls`
 * with the history's counts, the bias, the mask and min-p, with every id at or past `vocabLimit` masked; then the
 * token as {@link pickToken} draws it (greedy: the argmax, refusing a row with nothing allowed), and its
 * log-probabilities over the raw logits below `vocabLimit` when asked for. The GPU engines follow the same rule.
 *
 * @throws QkValueError when the mask allows no token below `vocabLimit`, or the logits hold NaN / +∞.
 */
export function chooseToken(
  logits: Float32Array,
  sampling: SamplingParams,
  step: number,
  controls: StepControls,
  vocabLimit: number,
): SampledToken {
  const vocab = logits.length;
  const limit = Math.min(vocabLimit, vocab);
  const history = historyArrays(controls.history, vocab);
  let mask: Int32Array | undefined;
  if (controls.mask !== null || limit < vocab) {
    const m = maskWordsFor(
      controls.mask ?? new Uint32Array(bitsetWords(vocab)).fill(0xffffffff),
      vocab,
      limit,
    );
    if (!m.any) throw noTokenAllowed('chooseToken', step);
    mask = m.words;
  }
  const words = bitsetWords(vocab);
  const processed = applyLogitControls(Tensor.fromStorage(logits, [1, vocab], 'f32'), {
    counts: Tensor.fromStorage(history.counts, [1, vocab], 'i32'),
    promptTokens: Tensor.fromStorage(history.promptTokens, [1, words], 'i32'),
    ...(sampling.logitBias?.size
      ? { bias: Tensor.fromStorage(denseBias(sampling.logitBias, vocab), [1, vocab], 'f32') }
      : {}),
    ...(mask === undefined ? {} : { mask: Tensor.fromStorage(mask, [1, words], 'i32') }),
    presencePenalty: sampling.presencePenalty ?? 0,
    frequencyPenalty: sampling.frequencyPenalty ?? 0,
    repetitionPenalty: sampling.repetitionPenalty ?? 1,
    minP: sampling.minP ?? 0,
    temperature: sampling.temperature,
  });
  const id =
    sampling.temperature === 0
      ? sample(processed, { temperature: 0 }).item()
      : pickToken(processed.data, sampling, step);
  if (controls.topLogprobs === null) return { id };
  const raw = Tensor.fromStorage(logits.subarray(0, limit), [1, limit], 'f32');
  const r = tokenLogprobs(raw, Tensor.fromStorage(Int32Array.of(id), [1], 'i32'), {
    topN: Math.min(controls.topLogprobs, limit),
  });
  return sampledToken(id, r.logprobs.data[0]!, r.topIds.data, r.topLogprobs.data, controls.topLogprobs);
}

/** A {@link SampledToken} from log-probability results (`topLogprobs` null: no alternatives were asked for). */
export function sampledToken(
  id: number,
  logprob: number,
  topIds: ArrayLike<number>,
  topValues: ArrayLike<number>,
  topLogprobs: number | null,
): SampledToken {
  if (topLogprobs === null) return { id };
  const top = Array.from({ length: Math.min(topIds.length, topLogprobs) }, (_, j) => ({
    id: topIds[j]!,
    logprob: topValues[j]!,
  }));
  return { id, logprob, topLogprobs: top };
}

/** The error of a step whose mask allows no token the tokenizer can print. */
export function noTokenAllowed(op: string, step: number): QkValueError {
  return new QkValueError(
    op,
    'constraint',
    `allowed no token at step ${step} (its mask has no bit set below the tokenizer's vocabulary); the constraint must allow at least one token until it reports isComplete().`,
  );
}

/** Throws when `sampling` sets a control that `Engine.next` would ignore (only `Engine.choose` applies them). */
export function refuseControlsInNext(op: string, sampling: SamplingParams): void {
  if (hasLogitControls(sampling)) {
    throw new QkValueError(
      op,
      'sampling',
      'sets a penalty, min-p or a logit bias, which next() does not apply; call choose() for a step with controls.',
    );
  }
}
