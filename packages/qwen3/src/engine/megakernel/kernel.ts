/**
 * The Qwen3 decode megakernel from TypeScript: one persistent CUDA kernel per batch-1 decode step of a dense Qwen3
 * model (embedding row, every layer, final norm, LM head, argmax), reading the weights and the KV cache that the
 * caller owns. The megakernel engine builds one over the layered engine's weights; prefill stays with the layered
 * kernels, and both share the cache. bf16 only, head size 128, up to 4 query heads per KV head (Qwen3-0.6B to 8B).
 * It reaches its native functions through the binding `@qk/ops` loads (addon.ts).
 */
import type { MegakernelPlan as BindingMegakernelPlan, MegakernelErrorCode } from '@qk/cuda-core';
import {
  type DType,
  QkCudaError,
  QkDeviceError,
  QkDisposedError,
  QkDtypeError,
  QkOutOfMemoryError,
  QkValueError,
  Tensor,
} from '@qk/ops';
import { checkShape, cudaInvFreq, nativeCall, deviceAddress as ptr } from '@qk/ops/internal';
import { hasPenalties } from '../sampling.js';
import { MEGAKERNEL_LIMITS, megakernelBinding, megakernelCodes } from './addon.js';
import { MegakernelTraceStats, type MegakernelTraceSummary, traceEvents } from './trace.js';
import { checkMegakernelTuning, type MegakernelTuning } from './tuning.js';

const HEAD_DIM = MEGAKERNEL_LIMITS.headDim;

/** Sizes of a dense Qwen3 model, as the megakernel sees them. */
export interface MegakernelDims {
  readonly hidden: number;
  readonly qHeads: number;
  readonly kvHeads: number;
  /** Intermediate (FFN) size. */
  readonly ffn: number;
  readonly layers: number;
  readonly vocab: number;
  /** The decoder projections' format (default bf16); the embedding, LM head and norms are bf16 whatever it is. */
  readonly weights?: MegakernelWeightFormat;
}

/**
 * How the megakernel's decoder projections are stored: bf16 rows, INT8 rows with one f32 scale per row, or INT4 rows
 * (two codes per byte, low nibble first, stored q + 8) with one f32 scale per row and group of `groupSize` inputs and,
 * with `zeroPoints`, one bf16 offset per row and group (AWQ / GPTQ zero points: `w = q · scale + offset`). The kernel
 * dequantises under the loads; the codes stream as they are stored (`@qk/ops` `Int8Weight` / `Int4Weight`).
 */
export interface MegakernelWeightFormat {
  readonly bits: 16 | 8 | 4;
  /** INT4: inputs per scale, a power of two ≥ 8 (every projection's width a multiple of 2 groups, 4 with offsets). */
  readonly groupSize?: number;
  /** INT4: whether each projection carries per-group offsets. */
  readonly zeroPoints?: boolean;
}

/** A quantized projection as the megakernel reads it (see {@link MegakernelWeightFormat}). */
export interface MegakernelQuantProjection {
  /** INT8: i8 `[rows, k]`; INT4: u8 `[rows, k / 2]`. */
  readonly qweight: Tensor;
  /** f32: INT8 `[rows]`; INT4 `[rows, k / groupSize]`. */
  readonly scales: Tensor;
  /** bf16 `[rows, k / groupSize]`, with zero points only. */
  readonly offsets?: Tensor;
}

/** A decoder projection: bf16 `[rows, k]`, or quantized codes and scales. */
export type MegakernelProjection = Tensor | MegakernelQuantProjection;

/**
 * How the megakernel launches for some sizes on this GPU (one persistent block per SM), or why it cannot: the addon's
 * answer, `MegakernelPlan` of @qk/cuda-core, read-only. (Restated here because the published types of `@qk/qwen3` may
 * not import the optional addon's; {@link PlanIsTheBindings} makes the compiler hold the two to one shape.)
 */
export type MegakernelPlan =
  | {
      readonly supported: true;
      /** Persistent blocks (one per SM). */
      readonly grid: number;
      readonly threads: number;
      /** Dynamic shared memory per block. */
      readonly sharedBytes: number;
      /** The weight ring in shared memory: slots of `slotBytes` each. */
      readonly slots: number;
      readonly slotBytes: number;
      /** The ring of launches that start below `shortRingUntil` (0: none): fewer, larger slots. */
      readonly shortSlots: number;
      readonly shortSlotBytes: number;
      readonly shortRingUntil: number;
      /**
       * Whether blocks claim GEMV tiles from shared counters (large models: balances the blocks) rather than take
       * fixed shares (small models: fewer round trips).
       */
      readonly claimTiles: boolean;
      /**
       * Whether the warps take QKV rows four at a time (two pairs that share one read of the input), where every
       * ring's tiles hold at least four pairs of them (Qwen3-0.6B). Tuning `qkvQuads: false` turns it off.
       */
      readonly qkvQuads: boolean;
      readonly workspaceBytes: number;
      /** Attention chunks per KV head, at most. */
      readonly maxChunks: number;
      /**
       * Bytes per row of the LM head's int8 screen (see {@link MegakernelSpec.screen}); 0 where the megakernel cannot
       * screen this model's LM head (claimed tiles, a hidden size that is not a multiple of 16).
       */
      readonly screenRowBytes: number;
    }
  | { readonly supported: false; readonly reason: string };

/** True when `A` and `B` are one type (each assignable to the other, member for member). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Fails to compile when {@link MegakernelPlan} and the binding's `MegakernelPlan` part ways. */
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, used by nothing
type PlanIsTheBindings<T extends true = Same<MegakernelPlan, Readonly<BindingMegakernelPlan>>> = T;

/**
 * One layer's device tensors: bf16, but for the projections (`qkv` `[q; k; v]` by rows, `o`, `gateUp` `[gate; up]`,
 * `down`), which are in the spec's {@link MegakernelDims.weights} format.
 */
export interface MegakernelLayer {
  readonly inputNorm: Tensor;
  readonly qkv: MegakernelProjection;
  readonly qNorm: Tensor;
  readonly kNorm: Tensor;
  readonly o: MegakernelProjection;
  readonly postNorm: Tensor;
  readonly gateUp: MegakernelProjection;
  readonly down: MegakernelProjection;
  /** `[maxContext, kvHeads, 128]`. */
  readonly kCache: Tensor;
  readonly vCache: Tensor;
}

/** What {@link Qwen3Megakernel} is built over. */
export interface MegakernelSpec extends MegakernelDims {
  readonly layerTensors: readonly MegakernelLayer[];
  readonly embed: Tensor;
  readonly finalNorm: Tensor;
  /** The LM head (the embedding itself when tied). */
  readonly lmHead: Tensor;
  readonly eps: number;
  readonly ropeTheta: number;
  /** Cache rows. */
  readonly maxContext: number;
  /** The argmax considers ids below this (default: the vocabulary). */
  readonly vocabLimit?: number;
  /**
   * The kernel's tuning knobs (default `{}`: every default; {@link MegakernelTuning} documents each), checked here and
   * read by the addon once, when the instance is made. `timeoutMs` there bounds every wait inside the kernel.
   */
  readonly tuning?: MegakernelTuning;
  /**
   * Record globaltimer stamps at every stage boundary of every block in each step, and aggregate them
   * ({@link Qwen3Megakernel.traceSummary}). A diagnostic: it costs a copy of the stamps after every step.
   */
  readonly trace?: boolean;
  /**
   * Screen the LM head in launches, greedy and sampled (default true where the plan allows it). The instance then
   * holds an int8 copy of the LM head with per-row scales and error bounds (`vocab · plan.screenRowBytes` bytes of
   * GPU memory). A screened step streams that copy instead of the bf16 LM head, bounds every logit from it, and
   * recomputes in bf16 (the unscreened arithmetic) only the rows whose bound reaches the best one (greedy) or the
   * top-k-th best (sampled): the same argmax, or the same top-k logits and so the same draw, id for id, from about
   * half the LM head's bytes. It writes no logits. Where the copy cannot be allocated, the instance runs unscreened.
   */
  readonly screen?: boolean;
}

/**
 * How the steps of a launch draw their tokens, by {@link sample}'s rule over the ids below the vocabulary limit
 * (top-k at most {@link Qwen3Megakernel.MAX_TOP_K}; a larger top-k, or none, is not served in the kernel).
 */
export interface MegakernelSampling {
  /** > 0 (0 is greedy: launch without sampling). */
  readonly temperature: number;
  /** 1 … {@link Qwen3Megakernel.MAX_TOP_K}. */
  readonly topK: number;
  /** In (0, 1]. */
  readonly topP: number;
  /** Step s of the launch draws with `uniforms[s]`, in [0, 1): one per step. */
  readonly uniforms: Float64Array;
}

/**
 * The sampling controls a launch applies in the kernel, as `applyLogitControls` applies them before `sample`
 * (argmax steps included): the penalties over the counts and ids seen that {@link Qwen3Megakernel.history}
 * uploaded (each step then adds its own token), and min-p for sampled launches.
 */
export interface MegakernelControls {
  /** > 0; 1 is off. */
  readonly repetitionPenalty: number;
  /** Finite; 0 is off. */
  readonly presencePenalty: number;
  /** Finite; 0 is off. */
  readonly frequencyPenalty: number;
  /** In [0, 1]; 0 is off. */
  readonly minP: number;
}

/** Checks a launch's controls, naming the field at fault; returns the binding's `[r, p, f, ln min-p]`. */
function controlsArray(op: string, c: MegakernelControls): Float64Array {
  const finite = (name: keyof MegakernelControls, ok: (x: number) => boolean, range: string) => {
    const v = c[name];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) {
      throw new QkValueError(op, `controls.${name}`, `must be ${range}, got ${String(v)}.`);
    }
    return v;
  };
  const r = finite('repetitionPenalty', (x) => x > 0, 'a finite number > 0 (1 is off)');
  const p = finite('presencePenalty', () => true, 'a finite number (0 is off)');
  const f = finite('frequencyPenalty', () => true, 'a finite number (0 is off)');
  const minP = finite('minP', (x) => x >= 0 && x <= 1, 'a number in [0, 1] (0 is off)');
  // (ln min-p as applyLogitControls takes it.)
  return Float64Array.of(r, p, f, minP > 0 ? Math.log(minP) : -Infinity);
}

/** What each of the binding's {@link MegakernelErrorCode}s means. */
const ERRORS: Readonly<Record<Exclude<keyof typeof MegakernelErrorCode, 'none'>, string>> = {
  timeout:
    'a block waited longer than the timeout for the others (is another program using this GPU? Then the megakernel cannot keep all its blocks resident; use the layered engine)',
  badPosition: 'the position is outside the KV cache',
  badToken: 'the token id is outside the vocabulary',
  nonFinite:
    'the logits are not usable: one is NaN or +infinity, or none is finite (the weights or activations hold NaN or infinity)',
  wrongPath:
    "the launch's position is not the one its state holds (the kernel for staged steps found a step that is not staged)",
  cancelled: 'the masked launch was cancelled before this step received its mask',
};

/** The sentence for an error code a step left, by its name in the binding's table. */
function describeError(op: string, code: number): string {
  const table = megakernelCodes(op).MegakernelErrorCode;
  const name = (Object.keys(table) as (keyof typeof table)[]).find((k) => table[k] === code);
  return name === undefined || name === 'none' ? `error code ${code}` : ERRORS[name];
}

/**
 * How the megakernel would launch for `dims` on this GPU with `tuning` (of which only `slotKb` changes the plan), or
 * why it cannot (`supported: false` with a reason).
 *
 * @throws QkValueError for a tuning field that is unknown, of the wrong type or out of range (naming it);
 *   QkDeviceError without a usable GPU.
 */
export function megakernelPlan(dims: MegakernelDims, tuning?: MegakernelTuning): MegakernelPlan {
  const op = 'megakernelPlan';
  const checked = checkMegakernelTuning(op, tuning, 'tuning');
  const b = megakernelBinding(op);
  return nativeCall(op, () =>
    b.megakernelPlan(
      dims.hidden,
      dims.qHeads,
      dims.kvHeads,
      dims.ffn,
      dims.layers,
      dims.vocab,
      checked,
      weightsArg(op, dims.weights),
    ),
  );
}

/** The binding's `weights` argument for `format` (checked, naming the field at fault). */
function weightsArg(
  op: string,
  format: MegakernelWeightFormat | undefined,
): { bits: number; groupSize: number; zeroPoints: boolean } {
  if (format === undefined) return { bits: 16, groupSize: 0, zeroPoints: false };
  const { bits, groupSize = 0, zeroPoints = false } = format;
  if (bits !== 16 && bits !== 8 && bits !== 4) {
    throw new QkValueError(op, 'weights.bits', `must be 16, 8 or 4, got ${String(bits)}.`);
  }
  if (bits === 4) {
    if (!Number.isSafeInteger(groupSize) || groupSize < 8 || (groupSize & (groupSize - 1)) !== 0) {
      throw new QkValueError(
        op,
        'weights.groupSize',
        `must be a power of two ≥ 8 for INT4, got ${String(groupSize)}.`,
      );
    }
  } else if (groupSize !== 0 || zeroPoints) {
    throw new QkValueError(
      op,
      'weights',
      `groupSize and zeroPoints apply to INT4 weights only (bits is ${bits}).`,
    );
  }
  if (typeof zeroPoints !== 'boolean') {
    throw new QkValueError(op, 'weights.zeroPoints', `must be a boolean, got ${String(zeroPoints)}.`);
  }
  return { bits, groupSize: bits === 4 ? groupSize : 0, zeroPoints };
}

/** Checks a launch's sampling parameters (the binding checks them again), naming the field at fault. */
function checkSampling(op: string, s: MegakernelSampling, steps: number): void {
  const most = Qwen3Megakernel.MAX_TOP_K;
  if (!Number.isSafeInteger(s.topK) || s.topK < 1 || s.topK > most) {
    throw new QkValueError(
      op,
      'sampling.topK',
      `must be an integer in [1, ${most}] (the kernel samples from at most ${most} candidates), got ${s.topK}.`,
    );
  }
  if (!(Number.isFinite(s.temperature) && s.temperature > 0)) {
    throw new QkValueError(op, 'sampling.temperature', `must be a finite number > 0, got ${s.temperature}.`);
  }
  if (!(s.topP > 0 && s.topP <= 1)) {
    throw new QkValueError(op, 'sampling.topP', `must lie in (0, 1], got ${s.topP}.`);
  }
  if (!(s.uniforms instanceof Float64Array) || s.uniforms.length !== steps) {
    throw new QkValueError(
      op,
      'sampling.uniforms',
      `must be a Float64Array of one value per step (${steps}).`,
    );
  }
  for (const u of s.uniforms) {
    if (!(u >= 0 && u < 1)) throw new QkValueError(op, 'sampling.uniforms', `must lie in [0, 1), got ${u}.`);
  }
}

/**
 * A megakernel instance: `launch(token, position, steps, sampling?)` queues decode steps in one kernel launch
 * (argmax, or top-k sampling) and `token(i)` waits for step i's token, which the kernel publishes while it goes
 * on; `step` / `result` are the one-step form. `logits` holds the last step's logits. The tensors of the spec must
 * stay alive until `dispose()`.
 */
export class Qwen3Megakernel {
  readonly plan: Extract<MegakernelPlan, { supported: true }>;
  /**
   * bf16 `[1, vocab]`: the last step's logits, written by {@link step} and by launches that ask for them (a launch
   * of a screened instance writes none unless asked: {@link screened}).
   */
  readonly logits: Tensor<'bf16'>;
  #handle: number | null;
  /** The LM head's int8 screen, when launches use one. */
  #screen: Tensor<'u8'> | null = null;
  readonly #state: Tensor<'i32'>;
  readonly #result: Tensor<'i32'>;
  readonly #workspace: Tensor<'u8'>;
  readonly #maxContext: number;
  readonly #vocab: number;
  /** The state the last step left on the device (its token and position + 1), when known. */
  #expected: { token: number; position: number } | null = null;
  /**
   * The last launch: its first position, its steps and whether they wait for masks, with the masks published so far
   * (null before the first, or after a failure).
   */
  #launched: { position: number; steps: number; masked: boolean; published: number } | null = null;
  /** Whether {@link history} has uploaded a state for penalised launches. */
  #historyUploaded = false;
  readonly #trace: Tensor<'u8'> | null;
  readonly #traceStats: MegakernelTraceStats | null;

  constructor(spec: MegakernelSpec) {
    const op = 'Qwen3Megakernel';
    const tuning = checkMegakernelTuning(op, spec.tuning, 'spec.tuning');
    const b = megakernelBinding(op);
    const plan = megakernelPlan(spec, tuning);
    if (!plan.supported) {
      throw new QkValueError(
        op,
        'spec',
        `this model is not served by the megakernel: ${plan.reason}; the layered engine runs it (engine "layered").`,
      );
    }
    this.plan = plan;
    const { hidden, qHeads, kvHeads, ffn, layers, vocab, maxContext } = spec;
    if (spec.layerTensors.length !== layers) {
      throw new QkValueError(
        op,
        'layerTensors',
        `must hold ${layers} layers, got ${spec.layerTensors.length}.`,
      );
    }
    const vocabLimit = spec.vocabLimit ?? vocab;
    const format = weightsArg(op, spec.weights);
    const all: [string, Tensor, number[], DType][] = [
      ['embed', spec.embed, [vocab, hidden], 'bf16'],
      ['finalNorm', spec.finalNorm, [hidden], 'bf16'],
      ['lmHead', spec.lmHead, [vocab, hidden], 'bf16'],
    ];
    // 18 addresses per layer: the 10 tensors, then the projections' scales and offsets (0n where there are none);
    // taken once every tensor is checked.
    const addresses: [number, Tensor][] = [];
    spec.layerTensors.forEach((l, i) => {
      const at = `layerTensors[${i}].`;
      all.push(
        [`${at}inputNorm`, l.inputNorm, [hidden], 'bf16'],
        [`${at}qNorm`, l.qNorm, [HEAD_DIM], 'bf16'],
        [`${at}kNorm`, l.kNorm, [HEAD_DIM], 'bf16'],
        [`${at}postNorm`, l.postNorm, [hidden], 'bf16'],
        [`${at}kCache`, l.kCache, [maxContext, kvHeads, HEAD_DIM], 'bf16'],
        [`${at}vCache`, l.vCache, [maxContext, kvHeads, HEAD_DIM], 'bf16'],
      );
      const projections: [string, MegakernelProjection, number, number, number][] = [
        ['qkv', l.qkv, (qHeads + 2 * kvHeads) * HEAD_DIM, hidden, 1],
        ['o', l.o, hidden, qHeads * HEAD_DIM, 4],
        ['gateUp', l.gateUp, 2 * ffn, hidden, 6],
        ['down', l.down, hidden, ffn, 7],
      ];
      projections.forEach(([name, p, rows, k, slot], j) => {
        const base = i * 18;
        if (format.bits === 16) {
          if (!(p instanceof Tensor)) {
            throw new QkValueError(op, `${at}${name}`, 'must be a bf16 tensor: spec.weights says bf16.');
          }
          all.push([`${at}${name}`, p, [rows, k], 'bf16']);
          addresses.push([base + slot, p]);
          return;
        }
        if (p instanceof Tensor) {
          throw new QkValueError(
            op,
            `${at}${name}`,
            `must be quantized ({ qweight, scales }): spec.weights says INT${format.bits}.`,
          );
        }
        const groups = format.bits === 4 ? k / format.groupSize : 0;
        if (format.bits === 4 && !Number.isInteger(groups)) {
          throw new QkValueError(
            op,
            'weights.groupSize',
            `must divide every projection's width; ${k} is not a multiple of ${format.groupSize}.`,
          );
        }
        all.push(
          format.bits === 8
            ? [`${at}${name}.qweight`, p.qweight, [rows, k], 'i8']
            : [`${at}${name}.qweight`, p.qweight, [rows, k / 2], 'u8'],
          [`${at}${name}.scales`, p.scales, format.bits === 8 ? [rows] : [rows, groups], 'f32'],
        );
        addresses.push([base + slot, p.qweight]);
        addresses.push([base + 10 + j, p.scales]);
        if (format.zeroPoints) {
          if (p.offsets === undefined) {
            throw new QkValueError(
              op,
              `${at}${name}.offsets`,
              'must be given: spec.weights has zero points.',
            );
          }
          all.push([`${at}${name}.offsets`, p.offsets, [rows, groups], 'bf16']);
          addresses.push([base + 14 + j, p.offsets]);
        } else if (p.offsets !== undefined) {
          throw new QkValueError(
            op,
            `${at}${name}.offsets`,
            'must be absent: spec.weights has no zero points.',
          );
        }
      });
      const own: [number, Tensor][] = [
        [0, l.inputNorm],
        [2, l.qNorm],
        [3, l.kNorm],
        [5, l.postNorm],
        [8, l.kCache],
        [9, l.vCache],
      ];
      for (const [j, t] of own) addresses.push([i * 18 + j, t]);
    });
    for (const [name, t, shape, dtype] of all) {
      if (t.disposed) throw new QkDisposedError(`${op}: ${name}`);
      if (t.device !== 'cuda') throw new QkDeviceError(`${name} must be a CUDA tensor.`, op);
      if (t.dtype !== dtype) {
        throw new QkDtypeError({
          op,
          arg: name,
          expected: dtype,
          got: t.dtype,
          hint: dtype === 'bf16' ? 'the megakernel runs bf16 models' : `spec.weights says INT${format.bits}`,
        });
      }
      checkShape(op, name, t, shape);
    }
    const pointers = new BigUint64Array(layers * 18);
    for (const [at, t] of addresses) pointers[at] = ptr(t);
    const invFreq = cudaInvFreq(HEAD_DIM, spec.ropeTheta);
    this.#state = Tensor.empty([2], 'i32', 'cuda');
    this.#result = Tensor.empty([2], 'i32', 'cuda');
    this.logits = Tensor.empty([1, vocab], 'bf16', 'cuda');
    this.#workspace = Tensor.empty([plan.workspaceBytes], 'u8', 'cuda');
    this.#trace = spec.trace ? Tensor.zeros([plan.grid * traceEvents(layers) * 8], 'u8').to('cuda') : null;
    this.#traceStats = spec.trace ? new MegakernelTraceStats(layers, plan.grid) : null;
    this.#maxContext = maxContext;
    this.#vocab = vocab;
    try {
      this.#handle = nativeCall(op, () =>
        b.megakernelCreate(
          megakernelCodes(op).DTypeCode.bf16,
          hidden,
          qHeads,
          kvHeads,
          ffn,
          layers,
          vocab,
          vocabLimit,
          maxContext,
          spec.eps,
          pointers,
          ptr(spec.embed),
          ptr(spec.finalNorm),
          ptr(spec.lmHead),
          ptr(invFreq),
          ptr(this.#state),
          ptr(this.#result),
          ptr(this.logits),
          ptr(this.#workspace),
          this.#trace === null ? 0n : ptr(this.#trace),
          tuning,
          format,
        ),
      );
    } catch (e) {
      for (const t of [this.#state, this.#result, this.logits, this.#workspace, this.#trace]) t?.dispose();
      throw e;
    }
    if (plan.screenRowBytes > 0 && (spec.screen ?? true)) {
      try {
        this.#attachScreen(vocab * plan.screenRowBytes);
      } catch (e) {
        this.dispose();
        throw e;
      }
    }
  }

  /** Builds the LM head's screen and hands it to the instance; without the memory for it, runs unscreened. */
  #attachScreen(bytes: number): void {
    const op = 'Qwen3Megakernel';
    let screen: Tensor<'u8'>;
    try {
      screen = Tensor.empty([bytes], 'u8', 'cuda');
    } catch (e) {
      if (e instanceof QkOutOfMemoryError) return; // (the screen only saves time)
      throw e;
    }
    const h = this.#handle!;
    let attached = false;
    try {
      attached = nativeCall(op, () => megakernelBinding(op).megakernelScreen(h, ptr(screen)));
    } finally {
      if (!attached) screen.dispose(); // (an instance that claims its tiles runs unscreened)
    }
    if (attached) this.#screen = screen;
  }

  /** Whether launches screen the LM head (and leave {@link logits} unwritten unless asked for them). */
  get screened(): boolean {
    return this.#screen !== null;
  }

  #live(op: string): number {
    if (this.#handle === null) throw new QkDisposedError(`Qwen3Megakernel.${op}`);
    return this.#handle;
  }

  /** Decode steps one launch may run. */
  static readonly MAX_STEPS = MEGAKERNEL_LIMITS.maxSteps;

  /** The largest top-k a launch samples with in the kernel. */
  static readonly MAX_TOP_K = MEGAKERNEL_LIMITS.maxTopK;

  /** Decode steps one launch of this instance may run: 1 when it records a trace, else {@link MAX_STEPS}. */
  get maxSteps(): number {
    return this.#trace !== null ? 1 : Qwen3Megakernel.MAX_STEPS;
  }

  /**
   * Queues one decode step of `token` at `position` (its key and value land in cache row `position`; attention
   * covers rows 0…position), with every logit computed into {@link logits}. Uploads the state only when it differs
   * from what the previous launch left.
   */
  step(token: number, position: number): void {
    this.launch(token, position, 1, undefined, { logits: true });
  }

  /**
   * Queues `steps` decode steps in one launch, from `token` at `position`: each step's token (its argmax, or with
   * `sampling` a draw by {@link sample}'s rule with that step's uniform) is the next step's input, on the device,
   * and each is published to the host the moment it is made ({@link token}). The cache rows position …
   * position + steps − 1 are written; `logits` ends with the last step's, unless the instance is {@link screened}
   * and `options.logits` is not true (the argmax, or the draw, is the same either way). An instance that
   * records a trace runs one step per launch.
   *
   * With `options.masked`, each step takes its token over the ids of a mask that the caller publishes while the step
   * runs ({@link mask}): the step's layers run first, and its LM head waits for the mask (within the instance's
   * timeout, 2 s by default, after which the launch fails). Publish every step's mask before asking for its token.
   * (The logits, where written, are every row's, allowed or not.)
   *
   * With `options.controls`, each step's logits go through the penalties (reading the counts and ids seen of the
   * last {@link history}, which the launch's steps add their tokens to) and, when sampled, min-p, before its token
   * is taken. The logits, where written, are the raw ones.
   */
  launch(
    token: number,
    position: number,
    steps: number,
    sampling?: MegakernelSampling,
    options?: {
      readonly logits?: boolean;
      readonly masked?: boolean;
      readonly controls?: MegakernelControls;
    },
  ): void {
    const op = 'Qwen3Megakernel.launch';
    const h = this.#live('launch');
    const masked = options?.masked === true;
    const pending = this.#launched;
    if (pending?.masked && pending.published < pending.steps) {
      throw new QkValueError(
        op,
        'options',
        `the last launch still waits for the mask of its step ${pending.published}: publish it (mask()) first.`,
      );
    }
    if (!Number.isSafeInteger(token) || token < 0 || token >= this.#vocab) {
      throw new QkValueError(op, 'token', `must be an integer id in [0, ${this.#vocab}), got ${token}.`);
    }
    if (!Number.isSafeInteger(position) || position < 0 || position >= this.#maxContext) {
      throw new QkValueError(op, 'position', `must lie in [0, ${this.#maxContext}), got ${position}.`);
    }
    const most = this.maxSteps;
    if (!Number.isSafeInteger(steps) || steps < 1 || steps > most) {
      throw new QkValueError(op, 'steps', `must be an integer in [1, ${most}], got ${steps}.`);
    }
    if (position + steps > this.#maxContext) {
      throw new QkValueError(
        op,
        'steps',
        `${steps} steps from position ${position} run past the KV cache (${this.#maxContext} rows).`,
      );
    }
    if (sampling !== undefined) checkSampling(op, sampling, steps);
    const controls = options?.controls === undefined ? undefined : controlsArray(op, options.controls);
    if (controls !== undefined && hasPenalties(options!.controls!) && !this.#historyUploaded) {
      throw new QkValueError(
        op,
        'options.controls',
        'asks for penalties, but no history was uploaded: call history() first.',
      );
    }
    const e = this.#expected;
    if (e === null || e.token !== token || e.position !== position) {
      this.#state.copyFrom(Tensor.fromStorage(Int32Array.of(token, position), [2], 'i32'));
    }
    this.#expected = null;
    this.#launched = null;
    nativeCall(op, () =>
      sampling === undefined
        ? megakernelBinding(op).megakernelLaunch(
            h,
            steps,
            0,
            1,
            1,
            undefined,
            position,
            options?.logits !== true,
            masked,
            controls,
          )
        : megakernelBinding(op).megakernelLaunch(
            h,
            steps,
            sampling.topK,
            sampling.temperature,
            sampling.topP,
            sampling.uniforms,
            position,
            options?.logits !== true,
            masked,
            controls,
          ),
    );
    this.#launched = { position, steps, masked, published: masked ? 0 : steps };
  }

  /**
   * Uploads the state that launches with penalties start from ({@link launch}'s `options.controls`): `counts`
   * (vocab counts of the generated ids) and `seen` (ceil(vocab / 32) words, bit `t & 31` of word `t >>> 5` set for an
   * id of the prompt or a generated one). Queued after the launches before it (which may still add their tokens to
   * the old state) and before the next. The arrays may be reused once it returns.
   */
  history(counts: Int32Array, seen: Uint32Array): void {
    const op = 'Qwen3Megakernel.history';
    const h = this.#live('history');
    if (!(counts instanceof Int32Array) || counts.length !== this.#vocab) {
      throw new QkValueError(op, 'counts', `must be an Int32Array of vocab = ${this.#vocab} counts.`);
    }
    const words = Math.ceil(this.#vocab / 32);
    if (!(seen instanceof Uint32Array) || seen.length !== words) {
      throw new QkValueError(op, 'seen', `must be a Uint32Array of ceil(vocab / 32) = ${words} words.`);
    }
    this.cancel(); // (a masked launch waiting for its mask would be cancelled by the upload anyway: see mask())
    nativeCall(op, () => megakernelBinding(op).megakernelHistory(h, counts, seen));
    this.#historyUploaded = true;
  }

  /**
   * Publishes the mask of step `index` of the last launch, a masked one ({@link launch}): `words` holds
   * ceil(vocab / 32) words, bit `t & 31` of word `t >>> 5` allowing id `t` (ids at or past the instance's
   * `vocabLimit` are never taken). Steps in order, each once; a step after the first only once the token of the step
   * before it has been read ({@link token}). Returns false, publishing nothing, when other GPU work came first: a
   * step waiting for its mask holds the stream, so any other call to the addon cancels the launch (its steps before
   * this one are done); the launch is then forgotten, and the next one uploads its state.
   */
  mask(index: number, words: Uint32Array): boolean {
    const op = 'Qwen3Megakernel.mask';
    const h = this.#live('mask');
    const launched = this.#launched;
    if (launched === null || !launched.masked) {
      throw new QkValueError(
        op,
        'index',
        'the last launch is not a masked one (launch with options.masked).',
      );
    }
    if (index !== launched.published) {
      throw new QkValueError(
        op,
        'index',
        `must be ${launched.published}, the next step without a mask, got ${index} (each step's mask once, in order).`,
      );
    }
    const count = Math.ceil(this.#vocab / 32);
    if (!(words instanceof Uint32Array) || words.length !== count) {
      throw new QkValueError(op, 'words', `must be a Uint32Array of ceil(vocab / 32) = ${count} words.`);
    }
    if (!nativeCall(op, () => megakernelBinding(op).megakernelMask(h, index, words))) {
      this.#launched = null;
      this.#expected = null;
      return false;
    }
    launched.published++;
    return true;
  }

  /**
   * Waits until step `index` of the last launch has made its token and returns it (the launch's later steps keep
   * running). A launch that failed inside the kernel throws after the instance is reset, so the next launch can
   * run: `QkValueError` on the argument "logits" where the step's logits were refused by `sample`'s rule (a NaN or
   * +infinity among them, or none above −infinity: what `sample` throws for such a row), `QkCudaError` otherwise (a
   * timed-out wait, a bad token or position).
   */
  token(index: number): number {
    const op = 'Qwen3Megakernel.token';
    const h = this.#live('token');
    const launched = this.#launched;
    if (launched === null) throw new QkValueError(op, 'index', 'there is no launch to read a token of.');
    if (!Number.isSafeInteger(index) || index < 0 || index >= launched.steps) {
      throw new QkValueError(op, 'index', `must be an integer in [0, ${launched.steps}), got ${index}.`);
    }
    if (index >= launched.published) {
      // (It would wait for the kernel, which waits for the mask, until the timeout.)
      throw new QkValueError(
        op,
        'index',
        `names a step whose mask is not published yet (mask(${index}, …) first).`,
      );
    }
    const got = nativeCall(op, () => megakernelBinding(op).megakernelToken(h, index));
    if (got < 0) {
      this.#expected = null;
      this.#launched = null;
      nativeCall(op, () => megakernelBinding(op).megakernelReset(h));
      if (-got === megakernelCodes(op).MegakernelErrorCode.nonFinite) {
        throw new QkValueError(
          op,
          'logits',
          `of decode step ${index} of the launch hold NaN or +Infinity, or none is finite; the weights or activations hold NaN or infinity.`,
        );
      }
      throw new QkCudaError(op, 'megakernel', `the decode step failed: ${describeError(op, -got)}.`);
    }
    if (index === launched.steps - 1) {
      this.#expected = { token: got, position: launched.position + launched.steps };
      if (this.#trace !== null) {
        const raw = this.#trace.to('cpu').data as Uint8Array;
        this.#traceStats!.add(new BigUint64Array(raw.buffer, raw.byteOffset, raw.byteLength / 8));
      }
    }
    return got;
  }

  /**
   * Drops the steps of the last launch, a masked one, that are not done: the next step to wait for a mask ends the
   * launch (the steps before it are done, their tokens published); the stream is waited for and the instance cleared,
   * so the next launch uploads its state. Nothing when every step has its mask, or the last launch is not masked.
   * (A step whose mask was published but whose token was not read may be dropped too: read tokens first.)
   */
  cancel(): void {
    const launched = this.#launched;
    if (launched === null || !launched.masked || launched.published >= launched.steps) return;
    const op = 'Qwen3Megakernel.cancel';
    const h = this.#live('cancel');
    this.#launched = null;
    this.#expected = null;
    nativeCall(op, () => megakernelBinding(op).megakernelCancel(h));
  }

  /** Waits for the last step of the last launch and returns its token (see {@link token}). */
  result(): number {
    const launched = this.#launched;
    return this.token(launched === null ? 0 : launched.steps - 1);
  }

  /** The aggregated stage timings of the steps so far (only with `trace`), or null. */
  traceSummary(): MegakernelTraceSummary | null {
    return this.#traceStats?.summary() ?? null;
  }

  get disposed(): boolean {
    return this.#handle === null;
  }

  dispose(): void {
    if (this.#handle === null) return;
    try {
      this.cancel(); // (a step waiting for its mask would otherwise hold the stream until the timeout)
    } catch {
      // (the destroy below waits for the stream and reports what failed there)
    }
    const h = this.#handle;
    this.#handle = null;
    try {
      nativeCall('Qwen3Megakernel.dispose', () =>
        megakernelBinding('Qwen3Megakernel.dispose').megakernelDestroy(h),
      );
    } finally {
      for (const t of [this.#state, this.#result, this.logits, this.#workspace, this.#trace, this.#screen])
        t?.dispose();
      this.#screen = null;
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
