/**
 * The {@link Engine} both GPU engines present, over the layered kernels (layered-stack.ts) and, for the megakernel
 * engine, a {@link KernelDecoder} that runs the decode steps up to its hand-off position: prompts, logits, token
 * choice (greedy and sampled, with or without the sampling controls), the piecewise steps a generation awaits
 * between, and the decode steps queued ahead of the caller (decode-queue.ts).
 */
import {
  cudaSynchronize,
  type FloatDType,
  QkDisposedError,
  QkValueError,
  sample,
  type Tensor,
} from '@qk/ops';
import type { PiecewiseEngine } from '../generation/generation.js';
import type {
  Engine,
  EngineName,
  PatchSpec,
  SampledToken,
  SamplingParams,
  StepControls,
  TokenHistory,
} from '../types.js';
import {
  checkForwardArgs,
  checkSampling,
  checkStepControls,
  type LazyStepControls,
  resolveStepControls,
  stepSeed,
} from './common.js';
import { type DecodeLane, DecodeQueue, sameSampling, stepsLeft } from './decode-queue.js';
import { DeviceSampler } from './device-sampling.js';
import { itemOf, type LayeredStack } from './layered-stack.js';
import { listVariants } from './modules.js';
import { isNonFiniteLogitsError, nonFiniteError } from './nonfinite.js';
import { hasPenalties, maskWordsFor, noTokenAllowed, refuseControlsInNext } from './sampling.js';

type T = Tensor<FloatDType>;

/**
 * The logits of a forward pass's last token, queued, not waited for: the step's buffer, or a new tensor (`owned`).
 * `settled()` throws if a kernel decoder's step failed on the device, and must be called once whatever was read from
 * the logits has been copied back (work queued after the step, such as sampling, then overlaps it instead of
 * waiting for it on the host).
 */
export interface Forwarded {
  readonly logits: T;
  readonly owned: boolean;
  readonly greedy: () => number;
  readonly settled: () => void;
}

/**
 * Decode steps whose tokens the kernel takes over the ids of a constraint's mask, which the host publishes while each
 * step runs: step k + 1's layers run while the host takes in step k's token and computes step k + 1's mask. The
 * kernel applies the sampling's penalties and min-p itself (where {@link takes} says so), counting its own tokens.
 */
export interface MaskedLane {
  /** Whether the kernel takes tokens by `sampling`, its logit controls included. */
  takes(sampling: SamplingParams): boolean;
  /**
   * Queues up to `most` (at least 1) masked steps from `id` at `position`, greedy or drawn by `sampling` (step k with
   * the uniform of generation step `stepIndex + k`); returns the steps queued, 0 (queuing nothing) where it cannot
   * (sampling the kernel does not draw by). With penalties, `history` is the generation's so far (else null): the
   * kernel starts from its counts and adds the tokens it takes.
   */
  queue(
    id: number,
    position: number,
    sampling: SamplingParams,
    stepIndex: number,
    most: number,
    history: TokenHistory | null,
  ): number;
  /**
   * Publishes the mask of queued step `index` (`⌈vocab / 32⌉` words) and waits for its token; null when other GPU
   * work cancelled the queued steps first (a step waiting for its mask holds the stream: any other call to the addon
   * drops it).
   */
  token(index: number, words: Uint32Array): number | null;
  /** Drops the queued steps that have no mask yet (the kernel stops at the first of them). */
  cancel(): void;
}

/** Decode steps that run in one kernel of their own (the megakernel) instead of the layered graph, up to a position. */
export interface KernelDecoder {
  readonly name: EngineName;
  /** See {@link Engine.lmScreen}. */
  readonly lmScreen: boolean;
  /** Whether the decode step at `position` runs here (else in the layered graph). */
  covers(position: number): boolean;
  /** The decode queue's lane for the positions this decoder covers. */
  readonly lane: DecodeLane;
  /** One decode step of `id` at `position` that writes its full logits row. */
  step(id: number, position: number): Forwarded;
  /** Whether the queued steps can draw by `sampling` in the kernel (else a sampled step runs as one {@link step}). */
  draws(sampling: SamplingParams): boolean;
  /** Masked decode steps (see {@link MaskedLane}), where the decoder has them. */
  readonly masked?: MaskedLane;
  /** Frees the decoder; returns what to run once the engine has freed everything else, if anything. */
  dispose(): (() => void) | undefined;
}

/**
 * The engine over `stack` (which it owns from here on), decoding in `decoder` where it covers the position and in the
 * layered graph elsewhere. Errors name `op`. Without a decoder, its modules can be patched.
 */
export function createGpuEngine(
  op: string,
  stack: LayeredStack,
  decoder: KernelDecoder | null,
): Engine & PiecewiseEngine {
  const { config, maxContext, prefillChunk, vocabLimit } = stack;
  const { vocabSize } = config;
  /** Device state of the sampling controls, made on the first step that asks for any. */
  let sampler: DeviceSampler | null = null;
  const queue = new DecodeQueue(maxContext, (position) =>
    decoder?.covers(position) ? decoder.lane : stack.decodeLane,
  );
  let filled = 0;
  let disposed = false;
  /** Every id allowed: the words of a masked step whose constraint returns no mask (made once). */
  let everyId: Uint32Array | null = null;
  /**
   * The masked steps queued in the decoder (see {@link maskedChoice}): `steps` from `position`, `inputs[k]` the token
   * step k was fed, drawn by `sampling` with the uniforms of generation steps `stepIndex + k`, for the generation
   * whose history is `history` (`generated` ids in it when queued).
   */
  let maskedRun: {
    position: number;
    steps: number;
    inputs: number[];
    sampling: SamplingParams;
    stepIndex: number;
    history: TokenHistory | null;
    generated: number;
  } | null = null;

  /** Forgets the steps queued ahead, and drops the masked ones: work queued from here supersedes them. */
  function supersede(): void {
    queue.clear();
    if (maskedRun !== null) {
      maskedRun = null;
      decoder!.masked!.cancel();
    }
  }

  const live = (what: string) => {
    if (disposed) throw new QkDisposedError(`${op}.${what}`);
  };

  /**
   * `pick()`'s result for generation step `stepIndex`, or {@link QkNonFiniteError} where that step's logits were
   * refused as non-finite: a token id (`id(result)`) of −1 from the checked argmax / sampling kernels, or @qk/ops
   * refusing them (`sample`), or the megakernel. See nonfinite.ts.
   */
  function finiteToken<R>(stepIndex: number, pick: () => R, id: (r: R) => number): R {
    let r: R;
    try {
      r = pick();
    } catch (e) {
      if (isNonFiniteLogitsError(e)) throw nonFiniteError(stepIndex, stack.namedWeights());
      throw e;
    }
    if (id(r) < 0) throw nonFiniteError(stepIndex, stack.namedWeights());
    return r;
  }

  /** Runs `ids` at `start…`; returns the logits of the last one (see {@link Forwarded}). */
  function forward(ids: readonly number[], start: number): Forwarded {
    checkForwardArgs(op, config, maxContext, filled, ids, start);
    supersede(); // steps launched ahead are superseded: this one runs after them on the stream
    if (ids.length === 1 && decoder !== null && decoder.covers(start)) {
      const r = decoder.step(ids[0]!, start);
      filled = start + 1;
      return r;
    }
    const settled = () => {};
    if (ids.length === 1) {
      const b = stack.decode(ids[0]!, start);
      filled = start + 1;
      return { logits: b.logits, owned: false, greedy: () => b.next.item(), settled };
    }
    const logits = stack.prefill(ids, start);
    filled = start + ids.length;
    return {
      logits,
      owned: true,
      greedy: () => stack.greedyToken(logits),
      settled,
    };
  }

  /**
   * Decode of `id` at `position` through the {@link DecodeQueue}, greedy, or (`drawn`) drawn by `sampling` in the
   * kernel decoder: its token, −1 where its logits were refused.
   */
  function nextQueuedDecode(
    id: number,
    position: number,
    sampling: SamplingParams,
    stepIndex: number,
    drawn: boolean,
  ): number {
    checkForwardArgs(op, config, maxContext, filled, [id], position);
    if (maskedRun !== null) supersede(); // (the decode queue's steps run after them on the stream)
    const draw = drawn ? { sampling, step: stepIndex } : null;
    const token = queue.next(id, position, draw, stepIndex, sampling.lastStep);
    filled = position + 1;
    return token;
  }

  /**
   * The piecewise steps ({@link PiecewiseEngine}): a prompt longer than `prefillChunk` prefills all its chunks but
   * the last with `between()` awaited after each, then runs the last one as `step` does, so an abort (Ctrl-C) is
   * seen within one chunk of GPU work (issue #51: stop within 1 s). Each chunk is waited for before `between()`:
   * otherwise the host would queue the whole prompt at once and only then see the abort, with the GPU still busy
   * for the full prefill. `filled` grows chunk by chunk, so an abort leaves the engine consistent (the rows before
   * it are valid; PrefixCache only records a prefill once it returns). Shorter steps (decode) run as `step` does.
   */
  async function piecewise<R>(
    ids: readonly number[],
    start: number,
    between: () => Promise<void>,
    step: (ids: readonly number[], start: number) => R,
  ): Promise<R> {
    checkForwardArgs(op, config, maxContext, filled, ids, start); // a prompt that cannot fit runs no chunk
    const last = Math.floor((ids.length - 1) / prefillChunk) * prefillChunk;
    for (let c = 0; c < last; c += prefillChunk) {
      const chunk = ids.slice(c, c + prefillChunk);
      checkForwardArgs(op, config, maxContext, filled, chunk, start + c);
      supersede(); // as in forward(): this pass overwrites what queued steps wrote
      stack.prefillPart(chunk, start + c, ids.length);
      cudaSynchronize();
      filled = start + c + chunk.length;
      await between();
      live('nextAsync'); // disposed while it waited: stop here
    }
    return step(ids.slice(last), start + last);
  }

  function invalidateGraph(): void {
    supersede();
    stack.releaseGraphs();
  }

  const patchable: Pick<Engine, 'variants' | 'patch'> = {
    variants: () => listVariants(),
    patch(spec: PatchSpec) {
      live('patch');
      const restore = stack.patch(spec);
      supersede();
      return () => {
        if (disposed) return;
        restore();
        supersede();
      };
    },
  };
  const engine: Engine & PiecewiseEngine = {
    name: decoder?.name ?? 'layered',
    ...(decoder === null ? {} : { lmScreen: decoder.lmScreen }),
    weightInfo: stack.weightInfo,
    config,
    dtype: stack.dtype,
    maxContext,
    logits(ids, start) {
      live('logits');
      const r = forward(ids, start);
      const f32 = r.logits.to('f32');
      try {
        const data = f32.to('cpu').data as Float32Array;
        try {
          r.settled();
        } catch (e) {
          // The megakernel's argmax refused them: the caller asked for the logits and sees their NaN/Inf itself.
          if (!isNonFiniteLogitsError(e)) throw e;
        }
        return data;
      } finally {
        if (f32 !== r.logits) f32.dispose();
        if (r.owned) r.logits.dispose();
      }
    },
    next(ids, start, sampling: SamplingParams, stepIndex) {
      live('next');
      checkSampling(op, sampling);
      refuseControlsInNext(op, sampling);
      return finiteToken(
        stepIndex,
        () => nextToken(ids, start, sampling, stepIndex),
        (t) => t,
      );
    },
    /**
     * A step with the sampling controls (penalties, bias, min-p, a constraint's mask, log-probabilities), applied on
     * the GPU by {@link DeviceSampler} to the step's logits row. The layered graph computes that row anyway. The
     * megakernel samples inside its persistent kernel, which knows none of the controls, so such a step runs as one
     * megakernel step per launch that writes its full logits row (no int8 LM-head screen, no steps queued ahead),
     * and the sampling kernels run after it on the same stream. The controls thus cost the multi-step launch, the
     * screen (it saves about half the LM head's bytes, ~0.15 of the ~1.19 GB a Qwen3-0.6B step reads), the controls
     * and sampling kernels and one host round trip per token; generations without controls never take this path.
     */
    choose(ids, start, sampling: SamplingParams, stepIndex, controls) {
      live('choose');
      checkSampling(op, sampling);
      checkStepControls(op, controls);
      if (!Number.isSafeInteger(stepIndex) || stepIndex < 0) {
        throw new QkValueError(op, 'step', `must be a non-negative integer, got ${stepIndex}.`);
      }
      return finiteToken(
        stepIndex,
        () => chooseToken(ids, start, sampling, stepIndex, controls),
        (t) => t.id,
      );
    },
    nextAsync(ids, start, sampling: SamplingParams, stepIndex, between) {
      live('nextAsync');
      checkSampling(op, sampling);
      return piecewise(ids, start, between, (rest, at) => engine.next(rest, at, sampling, stepIndex));
    },
    /**
     * {@link choose} in pieces. Controls given as a function are made after the step's forward pass is queued (the
     * last piece's, for a long prompt), so a constraint's mask is computed on the host while the device runs the
     * step: for a constrained decode step that is the mask's whole cost taken off the step's latency, up to the
     * forward pass's own time.
     */
    chooseAsync(ids, start, sampling: SamplingParams, stepIndex, controls: LazyStepControls, between) {
      live('chooseAsync');
      checkSampling(op, sampling);
      if (typeof controls !== 'function') checkStepControls(op, controls);
      if (!Number.isSafeInteger(stepIndex) || stepIndex < 0) {
        throw new QkValueError(op, 'step', `must be a non-negative integer, got ${stepIndex}.`);
      }
      return piecewise(ids, start, between, (rest, at) =>
        finiteToken(
          stepIndex,
          () => chooseToken(rest, at, sampling, stepIndex, controls),
          (t) => t.id,
        ),
      );
    },
    dropQueued() {
      if (!disposed) supersede();
    },
    // A kernel decoder's step is one fixed kernel: nothing to swap.
    ...(decoder === null ? patchable : {}),
    dispose() {
      if (disposed) return;
      disposed = true;
      invalidateGraph();
      const after = decoder?.dispose();
      sampler?.dispose();
      stack.dispose();
      // (after everything is freed: a callback that throws leaks nothing)
      after?.();
    },
  };
  return engine;

  /** The token of {@link Engine.next}: −1 where the logits were refused (see {@link finiteToken}). */
  function nextToken(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    stepIndex: number,
  ): number {
    if (ids.length === 1 && sampling.temperature === 0) {
      return nextQueuedDecode(ids[0]!, start, sampling, stepIndex, false);
    }
    if (ids.length === 1 && decoder !== null && decoder.covers(start) && decoder.draws(sampling)) {
      return nextQueuedDecode(ids[0]!, start, sampling, stepIndex, true);
    }
    const r = forward(ids, start);
    const views: Tensor[] = [];
    try {
      if (sampling.temperature === 0) return r.greedy();
      const flat = r.logits.reshape([vocabSize]);
      const row = flat.slice(0, vocabLimit);
      views.push(flat, row);
      return settledAfter(r, () =>
        itemOf(
          sample(row, {
            temperature: sampling.temperature,
            topK: sampling.topK,
            topP: sampling.topP,
            seed: stepSeed(sampling.seed, stepIndex),
          }),
        ),
      );
    } finally {
      for (const v of views) v.dispose();
      if (r.owned) r.logits.dispose();
    }
  }

  /**
   * A controlled decode step in the kernel decoder, where the controls ask for no log-probabilities (their maker says
   * so: `maskOnly`) and the kernel applies the sampling's logit controls itself (penalties and min-p, no logit bias:
   * {@link MaskedLane.takes}). The kernel takes the token over the mask's ids (every id without a constraint), with
   * the LM head's screen where the decoder has one, and no logits row, controls or sampling kernels after it (the path
   * of every other controlled step: see {@link Engine.choose}). Steps are queued ahead as masked steps (up to the
   * generation's last step): a step that is the next queued one (the next position, fed the token the step before it
   * made, drawn the same way, and with penalties the same generation's history grown by those tokens) only makes its
   * controls, publishes the mask and waits, while the kernel has already run its layers during the host's work on the
   * previous token. Null where this does not apply, queuing nothing; `{ made }` where the controls turned out to ask
   * for log-probabilities: the queued steps are dropped and the caller runs the step again with those controls (its
   * cache row is written again, with the same values).
   */
  function maskedChoice(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    stepIndex: number,
    controls: LazyStepControls,
  ): SampledToken | { made: StepControls } | null {
    const lane = decoder?.masked;
    if (
      ids.length !== 1 ||
      lane === undefined ||
      !decoder!.covers(start) ||
      typeof controls !== 'function' ||
      controls.maskOnly !== true ||
      !lane.takes(sampling)
    ) {
      return null;
    }
    checkForwardArgs(op, config, maxContext, filled, ids, start);
    // Penalties read the generation's history, which the controls carry: made before the steps are queued (a
    // constraint's mask is then computed before this step's layers run, not during them).
    const penalties = hasPenalties(sampling);
    let made: StepControls | null = null;
    const make = () => {
      try {
        made ??= resolveStepControls(op, controls);
      } catch (e) {
        supersede();
        throw e;
      }
      return made;
    };
    /** Queues masked steps from this one (up to the generation's last step); null where the lane cannot. */
    const queueFromHere = () => {
      const most = Math.max(1, stepsLeft(sampling.lastStep, stepIndex));
      const history = penalties ? make().history : null;
      const steps = lane.queue(ids[0]!, start, sampling, stepIndex, most, history);
      maskedRun =
        steps === 0
          ? null
          : {
              position: start,
              steps,
              inputs: [ids[0]!],
              sampling,
              stepIndex,
              history,
              generated: history?.generated.length ?? 0,
            };
      return maskedRun;
    };
    let run = maskedRun;
    const k = run === null ? -1 : start - run.position;
    if (
      run === null ||
      k < 0 ||
      k >= run.steps ||
      run.inputs[k] !== ids[0] ||
      run.stepIndex + k !== stepIndex ||
      !sameSampling(run.sampling, sampling) ||
      !sameControls(run.sampling, sampling) ||
      (penalties && !followsRun(run, make().history, k))
    ) {
      supersede();
      run = queueFromHere();
      if (run === null) return null;
    }
    filled = start + 1;
    made = make();
    if (made.topLogprobs !== null) {
      supersede();
      return { made };
    }
    everyId ??= allowAll(vocabSize); // (read, never written: the lane copies it)
    let words = everyId;
    if (made.mask !== null) {
      const w = maskWordsFor(made.mask, vocabSize, vocabLimit);
      if (!w.any) {
        supersede();
        throw noTokenAllowed(op, stepIndex);
      }
      words = new Uint32Array(w.words.buffer, w.words.byteOffset, w.words.length);
    }
    let id: number | null;
    try {
      id = lane.token(start - run.position, words);
      if (id === null) {
        // Other GPU work since the last step dropped the queued steps: queue them again from this one.
        run = queueFromHere();
        id = run === null ? null : lane.token(0, words);
      }
    } catch (e) {
      maskedRun = null; // (the kernel failed: the decoder has cleared its instance)
      throw e;
    }
    if (id === null || run === null) {
      maskedRun = null;
      throw new QkValueError(
        op,
        'controls',
        'the masked step was cancelled by other GPU work twice in a row.',
      );
    }
    const index = start - run.position;
    if (index + 1 < run.steps) {
      run.inputs.length = index + 1;
      run.inputs.push(id);
    } else {
      maskedRun = null;
    }
    return { id };
  }

  /**
   * The token of {@link Engine.choose}, by the controls (see {@link finiteToken}); controls given as a function are
   * made once the forward pass is queued.
   */
  function chooseToken(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    stepIndex: number,
    controls: LazyStepControls,
  ): SampledToken {
    const masked = maskedChoice(ids, start, sampling, stepIndex, controls);
    if (masked !== null && 'id' in masked) return masked;
    if (masked !== null) controls = masked.made; // (made once: the step runs again below, as any controlled step)
    const r = forward(ids, start);
    const views: Tensor[] = [];
    try {
      sampler ??= new DeviceSampler(vocabLimit);
      const flat = r.logits.reshape([vocabSize]);
      const slice = flat.slice(0, vocabLimit);
      const row = slice.reshape([1, vocabLimit]);
      views.push(flat, slice, row);
      const chooser = sampler;
      return settledAfter(r, () =>
        chooser.choose(row, sampling, stepIndex, resolveStepControls(op, controls)),
      );
    } finally {
      for (const v of views) v.dispose();
      if (r.owned) r.logits.dispose();
    }
  }
}

/** Whether `a` and `b` ask for the same logit controls (penalties, min-p; a logit bias by its map). */
function sameControls(a: SamplingParams, b: SamplingParams): boolean {
  return (
    (a.repetitionPenalty ?? 1) === (b.repetitionPenalty ?? 1) &&
    (a.presencePenalty ?? 0) === (b.presencePenalty ?? 0) &&
    (a.frequencyPenalty ?? 0) === (b.frequencyPenalty ?? 0) &&
    (a.minP ?? 0) === (b.minP ?? 0) &&
    a.logitBias === b.logitBias
  );
}

/**
 * Whether `history` is the one the queued run's kernel counts follow at its step `k`: the same generation, grown by
 * the k tokens the run took since it was queued (they are its inputs 1…k).
 */
function followsRun(
  run: { history: TokenHistory | null; generated: number; inputs: readonly number[] },
  history: TokenHistory,
  k: number,
): boolean {
  if (history !== run.history || history.generated.length !== run.generated + k) return false;
  for (let j = 1; j <= k; j++) {
    if (history.generated[run.generated + j - 1] !== run.inputs[j]) return false;
  }
  return true;
}

/** Every id allowed: a constraint's step whose mask is null. */
function allowAll(vocab: number): Uint32Array {
  return new Uint32Array(Math.ceil(vocab / 32)).fill(0xffffffff);
}

/**
 * `pick()`'s result from `r`'s logits, with `r` settled after it, and before its error: a failed kernel step explains
 * refused or bad logits better than `sample` or the sampler can.
 */
function settledAfter<R>(r: Forwarded, pick: () => R): R {
  let picked: R;
  try {
    picked = pick();
  } catch (e) {
    r.settled();
    throw e;
  }
  r.settled();
  return picked;
}
