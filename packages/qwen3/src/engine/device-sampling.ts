/**
 * The sampling controls on the GPU for the `layered` and `megakernel` engines: the step's logits row goes through
 * `applyLogitControls` (penalties from token counts kept on the device, the logit bias, the constraint's mask,
 * min-p) into an f32 row, `sample` draws from it with the step's seed (the uniform `pickToken` draws, so the token
 * is the one the cpu engine's reference `chooseToken` picks from the same logits), the drawn id is added to the
 * counts on the device, and log-probabilities come from the raw row when asked for.
 *
 * Per step the host uploads only what changed: the mask (⌈vocab/32⌉ words) when there is one, the bias when its
 * map changes, and the whole history (counts and the prompt's bitset) only when the generation's history is not the
 * one the device counts already follow (a new generation, or a token the device did not draw). Then it reads back
 * the id (4 bytes), and with log-probabilities 8 + 8·topN bytes more.
 */
import {
  addTokenCounts,
  applyLogitControls,
  bitsetWords,
  type LogitControls,
  QkValueError,
  sample,
  Tensor,
  tokenLogprobs,
} from '@qk/ops';
import type { SampledToken, SamplingParams, StepControls, TokenHistory } from '../types.js';
import { stepSeed } from './common.js';
import {
  denseBias,
  hasPenalties,
  historyArrays,
  maskWordsFor,
  noTokenAllowed,
  sampledToken,
} from './sampling.js';

/** Device state of the controls over rows of `vocab` logits (the ids an engine may generate). */
export class DeviceSampler {
  readonly #vocab: number;
  readonly #words: number;
  #counts: Tensor<'i32'> | null = null;
  #promptTokens: Tensor<'i32'> | null = null;
  #mask: Tensor<'i32'> | null = null;
  #bias: { map: ReadonlyMap<number, number>; tensor: Tensor<'f32'> } | null = null;
  readonly #processed: Tensor<'f32'>;
  readonly #ids: Tensor<'i32'>;
  /** The history the device counts follow: its length and last id once the token drawn last is appended. */
  #synced: { history: TokenHistory; length: number; last: number } | null = null;

  constructor(vocab: number) {
    this.#vocab = vocab;
    this.#words = bitsetWords(vocab);
    this.#processed = Tensor.empty([1, vocab], 'f32', 'cuda');
    this.#ids = Tensor.empty([1], 'i32', 'cuda');
  }

  /**
   * Draws the token of step `step` from `row` (a CUDA `[1, vocab]` logits row of any float dtype) by `sampling` and
   * `controls`, as `chooseToken` does on the host.
   *
   * @throws QkValueError when the mask allows no token, or the row holds NaN / +∞ (the sampler refuses it).
   */
  choose(row: Tensor, sampling: SamplingParams, step: number, controls: StepControls): SampledToken {
    const op = 'DeviceSampler.choose';
    const presencePenalty = sampling.presencePenalty ?? 0;
    const frequencyPenalty = sampling.frequencyPenalty ?? 0;
    const repetitionPenalty = sampling.repetitionPenalty ?? 1;
    const penalties = hasPenalties(sampling);
    const tensors: LogitControls = {};
    if (penalties) {
      this.#syncHistory(controls.history);
      tensors.counts = this.#counts!;
      tensors.promptTokens = this.#promptTokens!;
    }
    if (controls.mask !== null) {
      const { words, any } = maskWordsFor(controls.mask, this.#vocab, this.#vocab);
      if (!any) throw noTokenAllowed(op, step);
      this.#mask ??= Tensor.empty([1, this.#words], 'i32', 'cuda');
      this.#mask.copyFrom(Tensor.fromStorage(words, [1, this.#words], 'i32'));
      tensors.mask = this.#mask;
    }
    if (sampling.logitBias !== undefined && sampling.logitBias.size > 0)
      tensors.bias = this.#biasTensor(sampling.logitBias);
    const minP = sampling.minP ?? 0;
    // Log-probabilities alone change nothing in the draw: the raw row goes to the sampler as it is.
    const controlled = penalties || minP > 0 || Object.keys(tensors).length > 0;
    if (controlled) {
      applyLogitControls(row, {
        ...tensors,
        presencePenalty,
        frequencyPenalty,
        repetitionPenalty,
        minP,
        temperature: sampling.temperature,
        out: this.#processed,
      });
    }
    sample(controlled ? this.#processed : row, {
      temperature: sampling.temperature,
      topK: sampling.topK,
      topP: sampling.topP,
      seed: stepSeed(sampling.seed, step),
      out: this.#ids,
      checkIds: false,
    });
    // Queued before the id is read back: the counts follow the device's own draw.
    if (penalties) addTokenCounts(this.#counts!, this.#ids);
    const id = this.#ids.item();
    if (id < 0) {
      this.#synced = null;
      throw new QkValueError(
        op,
        'logits',
        `of step ${step} hold NaN or +Infinity, or no token survives the controls; the model's weights or the constraint are at fault.`,
      );
    }
    if (penalties) {
      const g = controls.history.generated;
      this.#synced = { history: controls.history, length: g.length + 1, last: id };
    }
    if (controls.topLogprobs === null) return { id };
    const topN = Math.min(controls.topLogprobs, this.#vocab);
    const r = tokenLogprobs(row, this.#ids, { topN });
    try {
      return sampledToken(id, r.logprobs.item(), r.topIds.toArray(), r.topLogprobs.toArray(), topN);
    } finally {
      for (const t of [r.logprobs, r.topIds, r.topLogprobs]) t.dispose();
    }
  }

  /** Brings the device counts and prompt bitset to `history` unless they already follow it. */
  #syncHistory(history: TokenHistory): void {
    const g = history.generated;
    const s = this.#synced;
    if (s !== null && s.history === history && s.length === g.length && g[g.length - 1] === s.last) return;
    const host = historyArrays(history, this.#vocab);
    this.#counts ??= Tensor.empty([1, this.#vocab], 'i32', 'cuda');
    this.#promptTokens ??= Tensor.empty([1, this.#words], 'i32', 'cuda');
    this.#counts.copyFrom(Tensor.fromStorage(host.counts, [1, this.#vocab], 'i32'));
    this.#promptTokens.copyFrom(Tensor.fromStorage(host.promptTokens, [1, this.#words], 'i32'));
  }

  #biasTensor(map: ReadonlyMap<number, number>): Tensor<'f32'> {
    if (this.#bias?.map !== map) {
      const tensor = this.#bias?.tensor ?? Tensor.empty([1, this.#vocab], 'f32', 'cuda');
      tensor.copyFrom(Tensor.fromStorage(denseBias(map, this.#vocab), [1, this.#vocab], 'f32'));
      this.#bias = { map, tensor };
    }
    return this.#bias.tensor;
  }

  dispose(): void {
    for (const t of [
      this.#counts,
      this.#promptTokens,
      this.#mask,
      this.#bias?.tensor,
      this.#processed,
      this.#ids,
    ]) {
      t?.dispose();
    }
    this.#synced = null;
  }
}
