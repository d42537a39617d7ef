/**
 * The `cpu` engine: the Qwen3 forward pass composed from the `@qk/ops` reference ops in float32, with a KV cache in
 * host memory. It is the readable definition of the model that the GPU engines are checked against, and the engine
 * that runs when there is no GPU.
 */
import {
  attention,
  embedding,
  type FloatDType,
  fusedAddRmsnorm,
  QkDisposedError,
  QkValueError,
  qkNormRope,
  rmsnorm,
  swiglu,
  Tensor,
} from '@qk/ops';
import { QkNonFiniteError } from '../errors.js';
import {
  anyLinear,
  checkQuantizedWeights,
  disposeQuantizedLayers,
  LINEAR_KEYS,
  type LinearKey,
  type QuantizedLayer,
} from '../quant/quantize.js';
import type {
  Engine,
  LayerWeights,
  Qwen3Config,
  Qwen3Weights,
  SampledToken,
  SamplingParams,
  StepControls,
  WeightInfo,
} from '../types.js';
import {
  checkForwardArgs,
  checkSampling,
  checkStepControls,
  checkWeightsMatchConfig,
  type LazyStepControls,
  resolveStepControls,
} from './common.js';
import { chooseToken, pickToken, refuseControlsInNext } from './sampling.js';

/** Options of {@link createCpuEngine}. */
export interface CpuEngineOptions {
  /** Cache rows: the longest prompt + generation the engine can hold. A positive integer. */
  readonly maxContext: number;
  /**
   * `next()` only picks ids below this (default: the whole vocabulary). Qwen3's embedding has 151,936 rows but its
   * tokenizer 151,669 tokens; random weights would otherwise pick ids no tokenizer can print. `logits()` is not
   * masked.
   */
  readonly vocabLimit?: number;
  /**
   * Quantized decoder projections (from `quantizeLinears` or a quantized checkpoint), one entry per layer. When
   * given, the engine runs those projections through the `@qk/ops` references `linearInt8` / `linearInt4` and
   * frees the float projections of `weights` at once; they may also be absent (a quantized checkpoint has none).
   */
  readonly quantized?: readonly QuantizedLayer[];
  /**
   * The longest stretch of work, in ms, that {@link CpuEngine.nextAsync} aims for between two pauses (where an
   * abort or Ctrl-C is seen). It pauses after every layer and between blocks of the LM head, and sizes its prompt
   * chunks (at most {@link PREFILL_CHUNK} rows) from the layer times it measures, so a stop lands within about this
   * long even at 8B on a slow CPU. Default {@link DEFAULT_STEP_BUDGET_MS}; `Infinity` keeps chunks at
   * {@link PREFILL_CHUNK} rows whatever they cost.
   */
  readonly stepBudgetMs?: number;
}

type F32Weights = Qwen3Weights<'f32'>;

/** Prompt tokens per piece of {@link CpuEngine.nextAsync}'s prefill, at most (see `stepBudgetMs`). */
export const PREFILL_CHUNK = 32;

/** Default of {@link CpuEngineOptions.stepBudgetMs}: well under the 1 s a stop may take. */
export const DEFAULT_STEP_BUDGET_MS = 200;

/**
 * Multiply-adds per second assumed before a layer has been timed: a slow core running the float32 reference ops
 * (this repository's 2-core CI machine does about twice that). It only sizes the first chunk; measurements take over.
 */
const ASSUMED_MACS_PER_SECOND = 2.5e8;

/** LM-head multiply-adds per piece between two pauses (151,936 × 4,096 at 8B is about 20 pieces). */
const LM_HEAD_PIECE_MACS = 32 * 2 ** 20;

/** Prompt rows per chunk such that one layer takes about `budgetMs`, from `msPerRow`; 1 … PREFILL_CHUNK. */
export function chunkRowsFor(budgetMs: number, msPerRow: number): number {
  if (budgetMs === Infinity || !(msPerRow > 0)) return PREFILL_CHUNK;
  return Math.max(1, Math.min(PREFILL_CHUNK, Math.floor(budgetMs / msPerRow)));
}

/** Multiply-adds of one prompt row through one decoder layer's projections (attention left out). */
function layerMacsPerRow(config: Qwen3Config): number {
  const { hiddenSize: h, numHeads, numKvHeads, headDim, intermediateSize: f } = config;
  return h * (numHeads + 2 * numKvHeads) * headDim + numHeads * headDim * h + 3 * h * f;
}

/**
 * Float32 CPU copies of `weights`. Tensors already f32 on the CPU are used as they are; others are converted and
 * their originals disposed, so the engine holds one copy. A tied LM head stays the same object as the embedding.
 */
function toCpuF32(weights: Qwen3Weights, dropLinears = false): F32Weights {
  const dropped = new Set<string>(dropLinears ? LINEAR_KEYS : []);
  const converted = new Map<Tensor, Tensor<'f32'>>();
  const convert = (t: Tensor<FloatDType>): Tensor<'f32'> => {
    if (t.device === 'cpu' && t.dtype === 'f32') return t as Tensor<'f32'>;
    let c = converted.get(t);
    if (c === undefined) {
      const host = t.device === 'cpu' ? t : t.to('cpu');
      c = host.to('f32');
      if (host !== t) host.dispose();
      converted.set(t, c);
    }
    return c;
  };
  const result: F32Weights = {
    embed: convert(weights.embed),
    layers: weights.layers.map((l) => {
      const layer = {} as Record<keyof LayerWeights, Tensor<'f32'>>;
      for (const key of Object.keys(l) as (keyof LayerWeights)[]) {
        if (dropped.has(key)) (l[key] as Tensor | undefined)?.dispose();
        else layer[key] = convert(l[key]);
      }
      return layer;
    }),
    norm: convert(weights.norm),
    lmHead: convert(weights.lmHead),
  };
  for (const original of converted.keys()) original.dispose();
  return result;
}

/** Every distinct tensor of a weight set (a tied LM head counts once). */
function allTensors(weights: Qwen3Weights): Set<Tensor> {
  const set = new Set<Tensor>([weights.embed, weights.norm, weights.lmHead]);
  for (const layer of weights.layers) for (const t of Object.values(layer)) if (t !== undefined) set.add(t);
  return set;
}

/**
 * One layer's keys or values, `[rows, kvHeads, headDim]` float32, grown by doubling up to `maxContext` so a short
 * conversation does not pay for the whole context up front.
 */
class CacheRows {
  #data: Float32Array;
  readonly #rowSize: number;
  readonly #maxRows: number;

  constructor(rowSize: number, maxRows: number) {
    this.#rowSize = rowSize;
    this.#maxRows = maxRows;
    this.#data = new Float32Array(Math.min(maxRows, 256) * rowSize);
  }

  /** Writes `rows` (whole rows, flat) starting at row `start`. */
  write(start: number, rows: Float32Array): void {
    const needed = start * this.#rowSize + rows.length;
    if (needed > this.#data.length) {
      let capacity = this.#data.length / this.#rowSize;
      while (capacity * this.#rowSize < needed) capacity *= 2;
      const grown = new Float32Array(Math.min(capacity, this.#maxRows) * this.#rowSize);
      grown.set(this.#data);
      this.#data = grown;
    }
    this.#data.set(rows, start * this.#rowSize);
  }

  /** A tensor view of rows `0 … rows−1`, shaped for `attention`. */
  view(rows: number, kvHeads: number, headDim: number): Tensor<'f32'> {
    return Tensor.fromStorage(this.#data.subarray(0, rows * this.#rowSize), [rows, kvHeads, headDim], 'f32');
  }
}

/**
 * `out[o] = Σ_k w[o, k] · x[k]` for one row `x`: the LM head of a decode step, which dominates the cpu engine's
 * time (vocab × hidden multiply-adds). A loop specialised to float32 storage with eight independent sums runs about
 * a third faster than the general `linear`, and writes into a buffer the engine reuses.
 */
function matVecRows(w: Float32Array, x: Float32Array, rows: number, n: number, out: Float32Array): void {
  for (let o = 0; o < rows; o++) {
    const base = o * n;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let s4 = 0;
    let s5 = 0;
    let s6 = 0;
    let s7 = 0;
    let k = 0;
    for (; k + 7 < n; k += 8) {
      const i = base + k;
      s0 += w[i]! * x[k]!;
      s1 += w[i + 1]! * x[k + 1]!;
      s2 += w[i + 2]! * x[k + 2]!;
      s3 += w[i + 3]! * x[k + 3]!;
      s4 += w[i + 4]! * x[k + 4]!;
      s5 += w[i + 5]! * x[k + 5]!;
      s6 += w[i + 6]! * x[k + 6]!;
      s7 += w[i + 7]! * x[k + 7]!;
    }
    for (; k < n; k++) s0 += w[base + k]! * x[k]!;
    out[o] = s0 + s1 + (s2 + s3) + (s4 + s5 + (s6 + s7));
  }
}

/** {@link Engine.weightInfo} of the cpu engine's float32 weights and (optional) quantized projections. */
function cpuWeightInfo(weights: F32Weights, quantized: readonly QuantizedLayer[] | undefined): WeightInfo {
  const linear = new Set<string>(LINEAR_KEYS);
  const projections = new Set<Tensor>();
  const others = new Set<Tensor>([weights.embed, weights.norm, weights.lmHead]);
  for (const layer of weights.layers) {
    for (const [key, t] of Object.entries(layer)) (linear.has(key) ? projections : others).add(t);
  }
  for (const layer of quantized ?? []) {
    for (const q of Object.values(layer)) {
      for (const t of [q.weight.qweight, q.weight.scales, q.bits === 4 ? q.offsets : undefined])
        if (t !== undefined) projections.add(t);
    }
  }
  const bytes = (set: Set<Tensor>) => [...set].reduce((n, t) => n + t.nbytes, 0);
  const bits = quantized?.[0]?.q.bits;
  return {
    format: bits === undefined ? 'bf16' : bits === 8 ? 'int8' : 'int4',
    projectionBytes: bytes(projections),
    otherBytes: bytes(others),
  };
}

class CpuEngine implements Engine {
  readonly name = 'cpu' as const;
  readonly dtype = 'f32' as const;
  readonly weightInfo: WeightInfo;
  readonly config: Qwen3Config;
  readonly maxContext: number;
  readonly #vocabLimit: number;
  #weights: F32Weights | null;
  #quantized: readonly QuantizedLayer[] | undefined;
  readonly #keys: CacheRows[];
  readonly #values: CacheRows[];
  readonly #logits: Float32Array;
  readonly #stepBudgetMs: number;
  /** Rows of the next prefill chunk of nextAsync: from the layer times measured so far (see `stepBudgetMs`). */
  #chunkRows: number;
  #filled = 0;

  constructor(
    config: Qwen3Config,
    weights: Qwen3Weights,
    maxContext: number,
    vocabLimit: number,
    quantized: readonly QuantizedLayer[] | undefined,
    stepBudgetMs: number,
  ) {
    this.config = config;
    this.#stepBudgetMs = stepBudgetMs;
    this.#chunkRows = chunkRowsFor(stepBudgetMs, (layerMacsPerRow(config) / ASSUMED_MACS_PER_SECOND) * 1e3);
    this.maxContext = maxContext;
    this.#vocabLimit = vocabLimit;
    this.#quantized = quantized;
    this.#weights = toCpuF32(weights, quantized !== undefined);
    this.weightInfo = cpuWeightInfo(this.#weights, quantized);
    const row = config.numKvHeads * config.headDim;
    this.#keys = weights.layers.map(() => new CacheRows(row, maxContext));
    this.#values = weights.layers.map(() => new CacheRows(row, maxContext));
    this.#logits = new Float32Array(config.vocabSize);
  }

  #live(op: string): F32Weights {
    if (this.#weights === null) throw new QkDisposedError(`${op} (the cpu engine was disposed)`);
    return this.#weights;
  }

  logits(ids: readonly number[], start: number): Float32Array {
    const op = 'CpuEngine.logits';
    const weights = this.#live(op);
    checkForwardArgs(op, this.config, this.maxContext, this.#filled, ids, start);
    // A copy: the engine's buffer is overwritten by the next call.
    return this.#forward(weights, ids, start).slice();
  }

  /** The checks {@link next} and {@link nextAsync} share; returns the live weights. */
  #checkNext(ids: readonly number[], start: number, sampling: SamplingParams, step: number) {
    const op = 'CpuEngine.next';
    const weights = this.#live(op);
    checkForwardArgs(op, this.config, this.maxContext, this.#filled, ids, start);
    checkSampling(op, sampling);
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new QkValueError(op, 'step', `must be a non-negative integer, got ${step}.`);
    }
    return weights;
  }

  next(ids: readonly number[], start: number, sampling: SamplingParams, step: number): number {
    refuseControlsInNext('CpuEngine.next', sampling);
    const weights = this.#checkNext(ids, start, sampling, step);
    const logits = this.#forward(weights, ids, start);
    this.#checkFinite(logits, step);
    logits.fill(-Infinity, this.#vocabLimit);
    return pickToken(logits, sampling, step);
  }

  /** {@link next} with the controls, by the TypeScript reference (`chooseToken`): this engine is that reference. */
  choose(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    controls: StepControls,
  ): SampledToken {
    checkStepControls('CpuEngine.choose', controls);
    const weights = this.#checkNext(ids, start, sampling, step);
    const logits = this.#forward(weights, ids, start);
    this.#checkFinite(logits, step);
    return chooseToken(logits, sampling, step, controls, this.#vocabLimit);
  }

  /**
   * {@link choose} in pieces, as {@link nextAsync} is {@link next} in pieces. Controls given as a function are made
   * once the logits are computed (nothing runs in parallel here; the GPU engines overlap them with the step).
   */
  async chooseAsync(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    controls: LazyStepControls,
    between: () => Promise<void>,
  ): Promise<SampledToken> {
    if (typeof controls !== 'function') checkStepControls('CpuEngine.choose', controls);
    const logits = await this.#logitsAsync(ids, start, sampling, step, between);
    return chooseToken(
      logits,
      sampling,
      step,
      resolveStepControls('CpuEngine.choose', controls),
      this.#vocabLimit,
    );
  }

  /**
   * {@link next} in pieces: the prompt runs `PREFILL_CHUNK` tokens at a time and `between()` is awaited after every
   * layer, so an abort (Ctrl-C) is seen within one layer of one chunk instead of after the whole prefill. The
   * result is the same token `next` picks.
   */
  async nextAsync(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    between: () => Promise<void>,
  ): Promise<number> {
    refuseControlsInNext('CpuEngine.next', sampling);
    const logits = await this.#logitsAsync(ids, start, sampling, step, between);
    logits.fill(-Infinity, this.#vocabLimit);
    return pickToken(logits, sampling, step);
  }

  /**
   * The step's logits, computed chunk by chunk and layer by layer with `between()` awaited in between. Each chunk's
   * slowest layer sets the next chunk's rows (see `stepBudgetMs`).
   */
  async #logitsAsync(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    between: () => Promise<void>,
  ): Promise<Float32Array> {
    const weights = this.#checkNext(ids, start, sampling, step);
    let logits: Float32Array | undefined;
    for (let from = 0; from < ids.length; ) {
      const rows = Math.min(this.#chunkRows, ids.length - from);
      const last = from + rows >= ids.length;
      const steps = this.#forwardSteps(weights, ids.slice(from, from + rows), start + from, last);
      let slowestLayerMs = 0;
      for (let t0 = performance.now(), r = steps.next(); ; r = steps.next()) {
        const t1 = performance.now();
        // Pieces of the LM head are not layers.
        if (r.value !== 'lm-head') slowestLayerMs = Math.max(slowestLayerMs, t1 - t0);
        if (r.done) {
          logits = r.value;
          break;
        }
        await between();
        this.#live('CpuEngine.next'); // disposed while it waited: stop here
        t0 = performance.now();
      }
      // A zero reading (a layer faster than the clock) keeps the current size, and so does a single row (a decode
      // step) unless chunks are already down to one row.
      if (slowestLayerMs > 0 && (rows > 1 || this.#chunkRows === 1)) {
        this.#chunkRows = chunkRowsFor(this.#stepBudgetMs, slowestLayerMs / rows);
      }
      from += rows;
    }
    this.#checkFinite(logits!, step);
    return logits!;
  }

  /** Throws {@link QkNonFiniteError} when `logits` hold NaN or ±Inf, naming the weights that hold any. */
  #checkFinite(logits: Float32Array, step: number): void {
    let bad = -1;
    for (let i = 0; i < logits.length; i++) {
      if (!Number.isFinite(logits[i]!)) {
        bad = i;
        break;
      }
    }
    if (bad < 0) return;
    const weights = this.#weights!;
    const names: string[] = [];
    const check = (name: string, t: Tensor<'f32'> | undefined) => {
      if (t !== undefined && names.length < 5 && t.data.some((x) => !Number.isFinite(x))) names.push(name);
    };
    check('embed', weights.embed);
    weights.layers.forEach((layer, i) => {
      for (const [key, t] of Object.entries(layer)) check(`layers[${i}].${key}`, t);
    });
    check('norm', weights.norm);
    if (weights.lmHead !== weights.embed) check('lmHead', weights.lmHead);
    throw new QkNonFiniteError(step, names);
  }

  #forward(weights: F32Weights, ids: readonly number[], start: number): Float32Array {
    const steps = this.#forwardSteps(weights, ids, start, true);
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value!;
    }
  }

  /**
   * The forward pass as a generator that yields after every layer but the last (`'layer'`) and between pieces of
   * the LM head (`'lm-head'`); its return value is the last position's logits, or `undefined` when `withLogits` is
   * false (a prompt chunk before the last: only the cache matters).
   */
  *#forwardSteps(
    weights: F32Weights,
    ids: readonly number[],
    start: number,
    withLogits: boolean,
  ): Generator<'layer' | 'lm-head', Float32Array | undefined, void> {
    const { numHeads, numKvHeads, headDim, rmsNormEps: eps, ropeTheta: theta } = this.config;
    const n = ids.length;
    const end = start + n;
    const positions = Array.from({ length: n }, (_, i) => start + i);
    let residual: Tensor<'f32'> = embedding(ids, weights.embed);
    let x = rmsnorm(residual, weights.layers[0]!.inputNorm, { eps });
    const last = weights.layers.length - 1;
    for (let i = 0; i <= last; i++) {
      const layer = weights.layers[i]!;
      const quantized = this.#quantized?.[i];
      const lin = (t: Tensor<'f32'>, key: LinearKey) => anyLinear(t, quantized?.[key] ?? layer[key]);
      const k = qkNormRope(lin(x, 'k').reshape([n, numKvHeads, headDim]), layer.kNorm, {
        positions,
        theta,
        eps,
      });
      this.#keys[i]!.write(start, k.data);
      this.#values[i]!.write(start, lin(x, 'v').data);
      // Only the last position's logits are returned, so the last layer needs its queries, MLP and residual for
      // that row alone; the other rows have already left their keys and values in the cache.
      const from = i === last ? n - 1 : 0;
      const rows = n - from;
      const xs = from === 0 ? x : x.slice(from);
      if (from > 0) residual = residual.slice(from);
      const q = qkNormRope(lin(xs, 'q').reshape([rows, numHeads, headDim]), layer.qNorm, {
        positions: positions.slice(from),
        theta,
        eps,
      });
      const context = attention(
        q,
        this.#keys[i]!.view(end, numKvHeads, headDim),
        this.#values[i]!.view(end, numKvHeads, headDim),
        { positionOffset: start + from },
      );
      const attnOut = lin(context.reshape([rows, numHeads * headDim]), 'o');
      ({ out: x, residual } = fusedAddRmsnorm(attnOut, residual, layer.postNorm, { eps }));
      const mlp = lin(swiglu(lin(x, 'gate'), lin(x, 'up')), 'down');
      const nextNorm = weights.layers[i + 1]?.inputNorm ?? weights.norm;
      ({ out: x, residual } = fusedAddRmsnorm(mlp, residual, nextNorm, { eps }));
      if (i < last) yield 'layer';
    }
    this.#filled = end;
    if (!withLogits) return undefined;
    const { vocabSize, hiddenSize } = this.config;
    const piece = Math.max(1, Math.floor(LM_HEAD_PIECE_MACS / hiddenSize));
    for (let r0 = 0; r0 < vocabSize; r0 += piece) {
      if (r0 > 0) yield 'lm-head';
      const r1 = Math.min(vocabSize, r0 + piece);
      const w = weights.lmHead.data.subarray(r0 * hiddenSize, r1 * hiddenSize);
      matVecRows(w, x.data, r1 - r0, hiddenSize, this.#logits.subarray(r0, r1));
    }
    return this.#logits;
  }

  dispose(): void {
    if (this.#weights === null) return;
    for (const t of allTensors(this.#weights)) t.dispose();
    if (this.#quantized !== undefined) disposeQuantizedLayers(this.#quantized);
    this.#weights = null;
  }
}

/**
 * The reference engine: float32 on the CPU through the `@qk/ops` reference ops. It takes ownership of `weights`:
 * tensors in another dtype or on the GPU are converted to float32 CPU copies (the originals are disposed), and
 * `dispose()` frees them all. The KV cache grows on demand up to `maxContext` rows.
 *
 * @throws QkShapeError when a weight's shape disagrees with `config`.
 * @throws QkValueError when `maxContext` is not a positive integer.
 */
export function createCpuEngine(
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: CpuEngineOptions,
): Engine {
  const op = 'createCpuEngine';
  const {
    maxContext,
    vocabLimit = config.vocabSize,
    quantized,
    stepBudgetMs = DEFAULT_STEP_BUDGET_MS,
  } = options;
  if (!Number.isSafeInteger(maxContext) || maxContext < 1) {
    throw new QkValueError(op, 'maxContext', `must be a positive integer, got ${maxContext}.`);
  }
  if (!Number.isSafeInteger(vocabLimit) || vocabLimit < 1) {
    throw new QkValueError(op, 'vocabLimit', `must be a positive integer, got ${vocabLimit}.`);
  }
  if (!(stepBudgetMs > 0)) {
    throw new QkValueError(
      op,
      'stepBudgetMs',
      `must be a positive number of ms (or Infinity), got ${stepBudgetMs}.`,
    );
  }
  if (quantized === undefined) checkWeightsMatchConfig(op, config, weights);
  else checkQuantizedWeights(op, config, weights, quantized);
  // Disposal bookkeeping relies on each weight being a tensor it may free.
  for (const t of allTensors(weights)) {
    if (t.disposed) throw new QkValueError(op, 'weights', 'holds a disposed tensor; load the weights again.');
  }
  return new CpuEngine(
    config,
    weights,
    maxContext,
    Math.min(vocabLimit, config.vocabSize),
    quantized,
    stepBudgetMs,
  );
}
