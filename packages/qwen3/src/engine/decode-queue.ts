/**
 * The decode steps a GPU engine queues ahead of the caller. Greedy decoding runs ahead (in the layered graph and in
 * the megakernel), and so does sampling in the megakernel (top-k ≤ 64): once `next()` has read the last token
 * queued, it queues the steps that feed that token back from the next position, and returns. The caller's own work
 * on the token (detokenising, streaming, the event loop) then overlaps the GPU instead of leaving it idle between
 * steps. A following call that asks for a queued step (the next position, with the token the previous step made,
 * drawing the same way) waits for it; any other call runs after the queued steps on the same stream and overwrites
 * what they wrote (their KV rows lie past the filled length, so nothing reads them).
 *
 * Where the steps of a position run is a {@link DecodeLane}: the layered graph queues one greedy step, and only when
 * that step's bucket graph is already captured; the megakernel runs several steps per launch, each step's token
 * feeding the next on the device and reaching the host as soon as it is made, and can always queue ahead, since the
 * kernel leaves [token, position] of the next step on the device and nothing is uploaded.
 */
import type { SamplingParams } from '../types.js';

/** How queued decode steps draw their tokens: by `sampling`, the first of them with the seed of step index `step`. */
export interface Draw {
  readonly sampling: SamplingParams;
  readonly step: number;
}

/** Where decode steps run: the layered graph, or the megakernel up to its hand-off position. */
export interface DecodeLane {
  /**
   * Queues decode steps from `id` at `position`, greedy (`draw` null) or drawing by `draw` (step k with the uniform of
   * step index `draw.step + k`), at most `most` (at least one); returns the steps queued.
   */
  queue(id: number, position: number, draw: Draw | null, most: number): number;
  /** Waits for step `index` of the steps this lane queued last; returns its token (−1: its logits were refused). */
  token(index: number): number;
  /** Whether steps from `position` drawing by `draw` may be queued before the caller asks for them. */
  runsAhead(position: number, draw: Draw | null): boolean;
}

/**
 * Steps a generation may still ask for from generation step `step` on, that one included, when its last step index
 * is `lastStep` (unbounded when unknown).
 */
export function stepsLeft(lastStep: number | undefined, step: number): number {
  return lastStep === undefined ? Number.POSITIVE_INFINITY : lastStep - step + 1;
}

/** Whether `a` and `b` draw tokens alike (temperature, top-k, top-p and seed; the step picks the uniform). */
export function sameSampling(a: SamplingParams, b: SamplingParams): boolean {
  return a.temperature === b.temperature && a.topK === b.topK && a.topP === b.topP && a.seed === b.seed;
}

/** Whether step `k` of steps queued drawing by `queued` draws as `wanted` asks (both greedy, or the same sampling). */
function sameDraw(queued: Draw | null, wanted: Draw | null, k: number): boolean {
  if (queued === null || wanted === null) return queued === wanted;
  return sameSampling(queued.sampling, wanted.sampling) && queued.step + k === wanted.step;
}

/** The decode steps queued ahead (see the module header), over the lanes `laneAt` picks by position. */
export class DecodeQueue {
  readonly #maxContext: number;
  readonly #laneAt: (position: number) => DecodeLane;
  /**
   * `steps` steps queued from `position` in `lane`; `inputs[k]` is the token step k was fed, known for the steps
   * whose predecessor's token has been read; `draw`: how they pick their tokens (null: greedy).
   */
  #ahead: {
    position: number;
    steps: number;
    inputs: number[];
    lane: DecodeLane;
    draw: Draw | null;
  } | null = null;

  constructor(maxContext: number, laneAt: (position: number) => DecodeLane) {
    this.#maxContext = maxContext;
    this.#laneAt = laneAt;
  }

  /** Forgets the queued steps: work queued after them on the stream supersedes them. */
  clear(): void {
    this.#ahead = null;
  }

  /**
   * Decode of one token of generation step `stepIndex`, greedy (`draw` null) or drawing by `draw`: claims a queued
   * step when it is this one (the next position, fed the token the step before it made, drawing the same way with
   * the next step index), or queues steps from here; once the last queued step is read, queues the steps after it
   * before returning the token, none past `lastStep` (the generation's last step index, when known). Returns −1,
   * queuing nothing, where the step's logits were refused.
   */
  next(
    id: number,
    position: number,
    draw: Draw | null,
    stepIndex: number,
    lastStep: number | undefined,
  ): number {
    // Steps the caller may still ask for, this one included (unbounded without a last step).
    const left = (step: number) => stepsLeft(lastStep, step);
    const k = this.#ahead === null ? -1 : position - this.#ahead.position;
    let queued = this.#ahead;
    if (
      queued === null ||
      k < 0 ||
      k >= queued.inputs.length ||
      queued.inputs[k] !== id ||
      !sameDraw(queued.draw, draw, k)
    ) {
      this.#ahead = null;
      const lane = this.#laneAt(position);
      queued = {
        position,
        steps: lane.queue(id, position, draw, left(stepIndex)),
        inputs: [id],
        lane,
        draw,
      };
      this.#ahead = queued;
    }
    const index = position - queued.position;
    let token: number;
    try {
      token = queued.lane.token(index);
    } catch (e) {
      this.#ahead = null;
      throw e;
    }
    if (token < 0) {
      // Refused logits (the layered graph's checked argmax): nothing may be fed this id; the caller reports it.
      this.#ahead = null;
      return token;
    }
    if (index + 1 < queued.steps) {
      queued.inputs.length = index + 1;
      queued.inputs.push(token);
      return token;
    }
    this.#ahead = null;
    const following = position + 1;
    const then = draw === null ? null : { sampling: draw.sampling, step: draw.step + 1 };
    if (following < this.#maxContext && left(stepIndex + 1) > 0) {
      const lane = this.#laneAt(following);
      if (lane.runsAhead(following, then)) {
        try {
          this.#ahead = {
            position: following,
            steps: lane.queue(token, following, then, left(stepIndex + 1)),
            inputs: [token],
            lane,
            draw: then,
          };
        } catch {
          // This token is already computed and is returned; the steps after it run again when they are asked for,
          // and a failure that persists is reported then, by that call.
          this.#ahead = null;
        }
      }
    }
    return token;
  }
}
