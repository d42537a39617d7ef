/**
 * The `layered` engine: the Qwen3 forward pass as one CUDA kernel per module, driven from TypeScript. A prompt runs
 * as one prefill (GEMMs and the flash prefill kernel over all its tokens); each decode step after it is a CUDA
 * graph captured once and replayed, so no JS-to-native crossing sits between its kernels, and each kernel is a
 * programmatic dependent launch of the one before (it is scheduled, and starts pulling its weights into L2, while
 * that one finishes). The step reads its token id, position and cache length from a small device tensor that the
 * host rewrites before each replay, which is what lets one graph serve many positions. Its attention is sized for a
 * bucket of cache rows (a power of two ≥ 256 holding the position, at most `maxContext`): the split-KV kernel cuts
 * that many rows into chunks, so a short context does not pay for merging the chunks of the whole cache. One graph
 * is captured per bucket reached, on first use (measured on an H100, Qwen3-0.6B at position 128: 1,056 µs per
 * step attending over a 4,353-row cache, 1,024 µs over a 256-row bucket).
 *
 * Greedy decoding runs ahead (both the layered graph and the megakernel), and so does sampling in the megakernel
 * (top-k ≤ 64): once `next()` has read the last token queued, it queues the steps that feed that token back from the
 * next position, and returns. The caller's own work on the token (detokenising, streaming, the event loop) then
 * overlaps the GPU instead of leaving it idle between steps. The layered graph queues one greedy step; the
 * megakernel runs several steps per launch (`megakernelSteps`), each step's token feeding the next on the device
 * and reaching the host as soon as it is made. A sampled step there draws in the kernel with the uniform of its
 * step's seed, by `sample`'s rule, so it gives the token `sample` would give on its logits. A following call
 * that asks for a queued step (the next position, with the token the previous step made) waits for it; any other
 * call runs after the queued steps on the same stream and overwrites what they wrote (their KV rows lie past the
 * filled length, so nothing reads them).
 *
 * With the built-in fused modules a decode layer is seven kernels: QKV GEMV (with the residual add and RMSNorm
 * folded in), QK-norm + RoPE + KV append, attention (chunks and merge), O GEMV, gate/up GEMV (add + RMSNorm in
 * front, SwiGLU behind), down GEMV. Patching any of RMSNorm, MLP or RoPE to another variant runs the modules
 * one by one instead.
 *
 * With `megakernel: true` (the `megakernel` engine) decode steps instead run in the Qwen3 decode megakernel over the
 * same weights and cache (greedy steps several per launch, others one per launch) up to the hand-off position
 * (`megakernelUntil`), and in the graph above from there on; prefill stays as above.
 *
 * The KV cache is one `[maxContext, kvHeads, headDim]` tensor for K and one for V per layer (row = position), the
 * layout the decode kernels and the megakernel read. The q/k/v and gate/up projections are stored fused
 * (`[q;k;v]`, `[gate;up]`).
 *
 * With `quantized` layers (INT8, INT4, AWQ/GPTQ repacked) the projections stay quantized on the GPU and run through
 * `linearInt8` / `linearInt4` in prefill and decode alike; a decode step then runs nine kernels per layer instead of
 * seven, still one captured graph (projections.ts says how the fused steps map onto quantized ones). The megakernel
 * streams bf16 weights only and refuses them. */
import {
  attentionWorkspace,
  CudaGraph,
  checkMegakernelTuning,
  cudaSynchronize,
  embedding,
  type FloatDType,
  linear,
  QkDeviceError,
  QkDisposedError,
  QkOutOfMemoryError,
  QkValueError,
  Qwen3Megakernel,
  qkNormRopeAppend,
  Rng,
  rmsnormLinear,
  sample,
  scatterRows,
  Tensor,
} from '@qk/ops';
import type { PiecewiseEngine } from '../generation/generation.js';
import { checkQuantizedWeights, disposeQuantizedLayers, type QuantizedLayer } from '../quant/quantize.js';
import type {
  Engine,
  PatchSpec,
  Qwen3Config,
  Qwen3Weights,
  SampledToken,
  SamplingParams,
  StepControls,
} from '../types.js';
import {
  checkForwardArgs,
  checkSampling,
  checkStepControls,
  checkWeightsMatchConfig,
  engineOutOfMemory,
  prefillOutOfMemory,
  stepSeed,
} from './common.js';
import { DeviceSampler } from './device-sampling.js';
import type { MegakernelEngineOptions } from './megakernel-options.js';
import { defaultModules, listVariants, type Modules, resolvePatch } from './modules.js';
import { isNonFiniteLogitsError, nonFiniteError } from './nonfinite.js';
import {
  buildLayerProjections,
  checkFusable,
  floatWeight,
  type LayerProjections,
  MEGAKERNEL_FLOAT_ONLY,
  normProject,
  project,
  projectionTensors,
  weightInfo,
} from './projections.js';
import { refuseControlsInNext } from './sampling.js';

/** Options of {@link createLayeredEngine}; the megakernel's apply with `megakernel: true`. */
export interface LayeredEngineOptions extends MegakernelEngineOptions {
  /** Cache rows: the longest prompt + generation the engine can hold. */
  readonly maxContext: number;
  /**
   * Only ids below this can be generated (default: the vocabulary). Qwen3's embedding has 151,936 rows but its
   * tokenizer 151,669 tokens; random weights would otherwise pick ids no tokenizer can print.
   */
  readonly vocabLimit?: number;
  /**
   * Decode with the Qwen3 megakernel (one persistent kernel launch per step, or per several greedy steps, over the
   * same weights and KV cache) instead of the captured graph of layered kernels; prefill stays layered. The engine
   * is then named `megakernel` and has no swappable modules. Default false.
   */
  readonly megakernel?: boolean;
  /**
   * Prompt tokens per prefill pass (default {@link DEFAULT_PREFILL_CHUNK}). A longer prompt is prefilled chunk by
   * chunk, each chunk attending to the cache rows the earlier ones wrote, so the temporary activations (the largest
   * is chunk × FFN size × 2 for the gate/up projection) are bounded by the chunk, not by the prompt.
   */
  readonly prefillChunk?: number;
  /**
   * Weight-only quantized decoder projections, one entry per layer (from `quantizeLinears` or a quantized
   * checkpoint, on the CPU or the GPU). The engine copies them to the GPU as they are and takes ownership (they and
   * any float projections of `weights`, which may be absent, are freed); they run through `linearInt8` /
   * `linearInt4`. Embedding, LM head and norms come from `weights`. Not with `megakernel`.
   */
  readonly quantized?: readonly QuantizedLayer[];
}

/**
 * Default prompt tokens per prefill pass: large enough that every GEMM has thousands of rows (the tensor cores stay
 * busy), small enough that the 8B gate/up activation of a chunk stays near 200 MB.
 */
export const DEFAULT_PREFILL_CHUNK = 4096;

/**
 * Where the megakernel hands decoding to the layered graph, per published dense shape, measured on an H100 (bf16,
 * the megakernel alone against the layered engine, 256 decode tokens from each position, medians of 3;
 * packages/cuda-core/csrc/megakernel/DESIGN.md, "Steps per launch and the host"). The megakernel was the faster one
 * at every position measured, up to 8,192: there 1.33× (0.6B), 1.24× (1.7B), 1.14× (4B) and 1.10× (8B). Each entry
 * is the end of the longest run (its start plus the 256 tokens it decoded), past which nothing was measured. Keyed by
 * hidden size, layers, query heads, KV heads and FFN size.
 */
const MEASURED_HANDOFFS: readonly { shape: readonly number[]; position: number }[] = [
  { shape: [1024, 28, 16, 8, 3072], position: 8448 },
  { shape: [2048, 28, 16, 8, 6144], position: 8448 },
  { shape: [2560, 36, 32, 8, 9728], position: 8448 },
  { shape: [4096, 36, 32, 8, 12288], position: 8448 },
];

/** The hand-off of a shape that was not measured: the lowest measured one (the megakernel's attention is the weak part). */
const kUnmeasuredHandoff = Math.min(...MEASURED_HANDOFFS.map((m) => m.position));

/**
 * The decode position from which the megakernel engine runs decode steps in the layered graph instead: for the
 * published dense shapes, the end of the longest run in which the megakernel was measured faster than the layered
 * graph on an H100 (8,448 for each of Qwen3-0.6B, 1.7B, 4B and 8B), and the lowest of those for other shapes. The
 * megakernel pays more per position of context than the layered split-KV attention (a head's keys are split over at
 * most grid / KV heads blocks), so far enough into a long context the layered graph wins; where depends on the shape.
 */
export function megakernelHandoff(config: Qwen3Config): number {
  const key = [
    config.hiddenSize,
    config.numLayers,
    config.numHeads,
    config.numKvHeads,
    config.intermediateSize,
  ];
  const hit = MEASURED_HANDOFFS.find((m) => m.shape.every((v, i) => v === key[i]));
  return hit?.position ?? kUnmeasuredHandoff;
}

/**
 * An integer option of the engine: `requested`, else `fallback()`; checked to lie in [min, max] (no upper bound
 * without `max`).
 */
function integerOption(
  op: string,
  name: string,
  requested: number | undefined,
  fallback: () => number,
  min: number,
  max?: number,
): number {
  const value = requested ?? fallback();
  if (!Number.isSafeInteger(value) || value < min || (max !== undefined && value > max)) {
    const range =
      max !== undefined
        ? `an integer in [${min}, ${max}]`
        : min === 0
          ? 'a non-negative integer'
          : `an integer ≥ ${min}`;
    throw new QkValueError(op, name, `must be ${range}, got ${value}.`);
  }
  return value;
}

type T = Tensor<FloatDType>;

/** How queued decode steps draw their tokens: by `sampling`, the first of them with the seed of step index `step`. */
interface Draw {
  readonly sampling: SamplingParams;
  readonly step: number;
}

/** Whether the megakernel draws tokens by these parameters itself (a top-k of at most 64; temperature > 0). */
export function sampledInKernel(s: Pick<SamplingParams, 'temperature' | 'topK'>): boolean {
  return s.temperature > 0 && s.topK >= 1 && s.topK <= Qwen3Megakernel.MAX_TOP_K;
}

/** Whether step `k` of steps queued drawing by `queued` draws as `wanted` asks (both greedy, or the same sampling). */
function sameDraw(queued: Draw | null, wanted: Draw | null, k: number): boolean {
  if (queued === null || wanted === null) return queued === wanted;
  const a = queued.sampling;
  const b = wanted.sampling;
  return (
    a.temperature === b.temperature &&
    a.topK === b.topK &&
    a.topP === b.topP &&
    a.seed === b.seed &&
    queued.step + k === wanted.step
  );
}

/** A decoder layer: its projections (float or quantized; q|k|v and gate|up fused, with views), norms and cache. */
interface Layer extends LayerProjections {
  inputNorm: T;
  qNorm: T;
  kNorm: T;
  postNorm: T;
  kCache: T;
  vCache: T;
}

/** Every tensor a layer holds, views included. */
function layerTensors(l: Layer): Tensor[] {
  const { qkv, q, k, v, o, gateUp, gate, up, down, ...rest } = l;
  return [...[qkv, q, k, v, o, gateUp, gate, up, down].flatMap(projectionTensors), ...Object.values(rest)];
}

/**
 * `f`'s result, with every tensor it passed through `view` disposed when `f` returns or throws: a view keeps its
 * storage alive until disposed, and one left to the garbage collector holds GPU memory it cannot see.
 */
function withViews<R>(f: (view: <X extends Tensor>(t: X) => X) => R): R {
  const views: Tensor[] = [];
  try {
    return f((t) => {
      views.push(t);
      return t;
    });
  } finally {
    for (const v of views) v.dispose();
  }
}

/** Decode-step buffers: everything a captured step reads or writes, allocated once. */
interface StepBuffers {
  /** i32 `[3]`: token id, its position, the cache length after it (position + 1); views below. */
  state: Tensor<'i32'>;
  id: Tensor<'i32'>;
  position: Tensor<'i32'>;
  length: Tensor<'i32'>;
  /** The residual stream; `residualAlt` is its other half in the fused step (see decodeFused). */
  residual: T;
  residualAlt: T;
  x: T;
  qkv: T;
  q: T;
  k: T;
  attn: T;
  o: T;
  /** SwiGLU activations `[1, ffn]` (fused step). */
  h: T;
  mlp: T;
  logits: T;
  next: Tensor<'i32'>;
}

export function createLayeredEngine(
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: LayeredEngineOptions,
): Engine & PiecewiseEngine {
  const op = 'layeredEngine';
  if (weights.embed.device !== 'cuda') {
    throw new QkDeviceError('needs its weights on "cuda"; load them with device "cuda".', op);
  }
  const { quantized } = options;
  if (quantized === undefined) checkWeightsMatchConfig(op, config, weights);
  else {
    if (options.megakernel)
      throw new QkValueError(op, 'quantized', `cannot be given: ${MEGAKERNEL_FLOAT_ONLY}.`);
    checkQuantizedWeights(op, config, weights, quantized);
    checkFusable(quantized);
  }
  const { maxContext } = options;
  if (!Number.isSafeInteger(maxContext) || maxContext < 1) {
    throw new QkValueError(op, 'maxContext', `must be a positive integer, got ${maxContext}.`);
  }
  const prefillChunk = options.prefillChunk ?? DEFAULT_PREFILL_CHUNK;
  if (!Number.isSafeInteger(prefillChunk) || prefillChunk < 1) {
    throw new QkValueError(op, 'prefillChunk', `must be a positive integer, got ${options.prefillChunk}.`);
  }
  const { hiddenSize: hidden, numHeads: H, numKvHeads: KV, headDim: D, vocabSize } = config;
  const vocabLimit = Math.min(options.vocabLimit ?? vocabSize, vocabSize);
  if (!Number.isSafeInteger(vocabLimit) || vocabLimit < 1) {
    throw new QkValueError(op, 'vocabLimit', `must be a positive integer, got ${options.vocabLimit}.`);
  }
  const megakernelSteps = options.megakernel
    ? integerOption(op, 'megakernelSteps', options.megakernelSteps, () => 4, 1, Qwen3Megakernel.MAX_STEPS)
    : 1;
  const megakernelUntil = options.megakernel
    ? integerOption(op, 'megakernelUntil', options.megakernelUntil, () => megakernelHandoff(config), 0)
    : 0;
  // Checked here, before any allocation, so that the error names the engine's option.
  const megakernelTuning = options.megakernel
    ? checkMegakernelTuning(op, options.megakernelTuning)
    : undefined;
  const dtype = weights.embed.dtype;
  const eps = config.rmsNormEps;
  const theta = config.ropeTheta;

  const target = { device: 'cuda' as const, dtype, shared: new Map<string, T>() };
  const { embed, norm, lmHead } = weights;
  const layers: Layer[] = [];
  /** What this engine allocated so far: freed when making the rest fails (the caller frees the weights it gave). */
  const own = new Set<Tensor>();
  let workspace: Tensor<'u8'>;
  let megakernel: Qwen3Megakernel | null = null;
  const onTrace = options.megakernelTrace;
  try {
    for (const [i, w] of weights.layers.entries()) {
      const projections = buildLayerProjections(w, quantized?.[i], target);
      // Float layers: the fused q|k|v and gate|up are copies (o and down stay the caller's); quantized: all copies.
      // Their views hold the memory too (a view retains its buffer), so they go with them.
      const { o, down, ...fused } = projections;
      const made = quantized === undefined ? Object.values(fused) : Object.values(projections);
      for (const t of made.flatMap(projectionTensors)) own.add(t);
      const kCache = Tensor.empty([maxContext, KV, D], dtype, 'cuda');
      own.add(kCache);
      const vCache = Tensor.empty([maxContext, KV, D], dtype, 'cuda');
      own.add(vCache);
      layers.push({
        ...projections,
        inputNorm: w.inputNorm,
        qNorm: w.qNorm,
        kNorm: w.kNorm,
        postNorm: w.postNorm,
        kCache,
        vCache,
      });
    }
    workspace = attentionWorkspace(H, D, maxContext);
    own.add(workspace);
    if (options.megakernel) {
      megakernel = new Qwen3Megakernel({
        hidden,
        qHeads: H,
        kvHeads: KV,
        ffn: config.intermediateSize,
        layers: layers.length,
        vocab: vocabSize,
        layerTensors: layers.map((l) => ({
          ...l,
          qkv: floatWeight(l.qkv, 'qkv'),
          o: floatWeight(l.o, 'o'),
          gateUp: floatWeight(l.gateUp, 'gateUp'),
          down: floatWeight(l.down, 'down'),
        })),
        embed,
        finalNorm: norm,
        lmHead,
        eps,
        ropeTheta: theta,
        maxContext,
        vocabLimit,
        trace: onTrace !== undefined,
        screen: options.megakernelScreen,
        tuning: megakernelTuning,
      });
    }
  } catch (e) {
    for (const t of own) t.dispose();
    for (const t of target.shared.values()) t.dispose();
    if (!(e instanceof QkOutOfMemoryError)) throw e;
    const cacheBytes = 2 * config.numLayers * maxContext * KV * D * (dtype === 'f32' ? 4 : 2);
    throw engineOutOfMemory(op, options.megakernel ? 'megakernel' : 'layered', e, {
      maxContext,
      bytes: cacheBytes,
    });
  }
  // The engine now holds device copies of the quantized projections.
  if (quantized !== undefined) disposeQuantizedLayers(quantized);

  let table = defaultModules();
  let step: StepBuffers | null = null;
  /** Device state of the sampling controls, made on the first step that asks for any. */
  let sampler: DeviceSampler | null = null;
  /** Captured decode steps by bucket of cache rows (see {@link decodeRows}). */
  const graphs = new Map<number, CudaGraph>();
  /** The cache rows the decode step being run or captured attends over. */
  let stepRows = maxContext;
  /**
   * The decode steps queued ahead by `next()` (see the file header): `steps` of them from `position`; `inputs[k]`
   * is the token step k was fed, known for the steps whose predecessor's token has been read; `draw`: how they
   * pick their tokens (null: greedy).
   */
  let ahead: {
    position: number;
    steps: number;
    inputs: number[];
    inMegakernel: boolean;
    draw: Draw | null;
  } | null = null;
  let filled = 0;
  let disposed = false;

  const live = (what: string) => {
    if (disposed) throw new QkDisposedError(`layeredEngine.${what}`);
  };

  /** The engine's float weights by the cpu engine's names for them (a quantized projection: its scales). */
  function* namedWeights(): Generator<readonly [string, Tensor]> {
    yield ['embed', embed];
    for (const [i, l] of layers.entries()) {
      for (const key of ['inputNorm', 'qNorm', 'kNorm', 'postNorm'] as const)
        yield [`layers[${i}].${key}`, l[key]];
      for (const key of ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const) {
        for (const t of projectionTensors(l[key])) yield [`layers[${i}].${key}`, t];
      }
    }
    yield ['norm', norm];
    yield ['lmHead', lmHead];
  }

  /**
   * `pick()`'s result for generation step `stepIndex`, or {@link QkNonFiniteError} where that step's logits were
   * refused as non-finite: a token id (`id(result)`) of −1 from the checked argmax / sampling kernels, or @qk/ops
   * refusing them (`sample`, the megakernel). See nonfinite.ts.
   */
  function finiteToken<R>(stepIndex: number, pick: () => R, id: (r: R) => number): R {
    let r: R;
    try {
      r = pick();
    } catch (e) {
      if (isNonFiniteLogitsError(e)) throw nonFiniteError(stepIndex, namedWeights());
      throw e;
    }
    if (id(r) < 0) throw nonFiniteError(stepIndex, namedWeights());
    return r;
  }

  /** The greedy token of a `[1, vocab]` logits row, −1 where the row is refused (NaN or +∞, or all −∞). */
  const greedyToken = (logits: T): number =>
    withViews((view) =>
      itemOf(
        sample(view(view(logits.reshape([vocabSize])).slice(0, vocabLimit)), {
          temperature: 0,
          checkIds: false,
        }),
      ),
    );

  /** QK-norm + RoPE of one q|k|v projection's q and k heads into `q`, k and v appended at `positions`. */
  function appendAttentionInputs(layer: Layer, qkv: T, positions: Tensor<'i32'>, q: T): void {
    qkNormRopeAppend(qkv, layer.qNorm, layer.kNorm, {
      qHeads: H,
      kvHeads: KV,
      positions,
      theta,
      eps,
      out: q,
      kCache: layer.kCache,
      vCache: layer.vCache,
    });
  }

  /**
   * The layers over `tokens` tokens already embedded in `b.residual`, ending with the final norm in `b.x`. A
   * decode step (`kvLength` set) attends over the whole cache up to the device-side length; a prefill over the
   * rows `0 … start + tokens − 1`.
   */
  function runLayers(
    m: Modules,
    b: Pick<StepBuffers, 'position' | 'residual' | 'x' | 'q' | 'k' | 'attn' | 'o' | 'mlp'> & {
      qkv: T | null;
    },
    tokens: number,
    start: number,
    kvLength: Tensor<'i32'> | null,
  ): void {
    const rows = kvLength === null ? start + tokens : stepRows;
    m.rmsnorm({
      x: b.residual,
      residual: null,
      weight: layers[0]!.inputNorm,
      eps,
      out: b.x,
      residualOut: b.residual,
    });
    // Each layer's views and per-call projections are disposed when the layer ends: a view keeps its storage alive
    // until disposed, and one left to the garbage collector would hold a prefill buffer's GPU memory long after the
    // prefill (the queued kernels still run: the allocator reuses freed blocks in stream order).
    layers.forEach((layer, i) => {
      withViews((own) => {
        if (table.names.rope === 'fused') {
          // One projection over the fused [q; k; v] weight, then one kernel: QK-norm + RoPE of q and k, k and v
          // appended to the cache.
          const qkv = project(b.x, layer.qkv, tokens === 1 ? b.qkv! : undefined);
          appendAttentionInputs(layer, qkv, b.position, b.q);
          if (tokens > 1) qkv.dispose();
        } else {
          // One token: one GEMV over the fused [q; k; v] weight, then views of its output. Several: three GEMMs.
          let qIn: T;
          let kIn: T;
          let vIn: T;
          if (tokens === 1) {
            project(b.x, layer.qkv, b.qkv!);
            const heads = b.qkv!.reshape([H + 2 * KV, D]);
            own(heads);
            qIn = own(own(heads.slice(0, H)).reshape([1, H, D]));
            kIn = own(own(heads.slice(H, H + KV)).reshape([1, KV, D]));
            vIn = own(own(heads.slice(H + KV)).reshape([1, KV, D]));
          } else {
            // The projections' own tensors as well as their views.
            qIn = own(own(project(b.x, layer.q)).reshape([tokens, H, D]));
            kIn = own(own(project(b.x, layer.k)).reshape([tokens, KV, D]));
            vIn = own(own(project(b.x, layer.v)).reshape([tokens, KV, D]));
          }
          m.rope({ x: qIn, normWeight: layer.qNorm, positions: b.position, theta, eps, out: b.q });
          m.rope({ x: kIn, normWeight: layer.kNorm, positions: b.position, theta, eps, out: b.k });
          scatterRows(layer.kCache, b.k, b.position);
          scatterRows(layer.vCache, vIn, b.position);
        }
        m.attention({
          q: b.q,
          k: own(layer.kCache.slice(0, rows)),
          v: own(layer.vCache.slice(0, rows)),
          kvLength,
          positionOffset: start,
          workspace,
          out: b.attn,
        });
        project(own(b.attn.reshape([tokens, H * D])), layer.o, b.o);
        m.rmsnorm({
          x: b.o,
          residual: b.residual,
          weight: layer.postNorm,
          eps,
          out: b.x,
          residualOut: b.residual,
        });
        m.mlp({ x: b.x, gateUp: layer.gateUp, gate: layer.gate, up: layer.up, down: layer.down, out: b.mlp });
        const nextNorm = layers[i + 1]?.inputNorm ?? norm;
        m.rmsnorm({
          x: b.mlp,
          residual: b.residual,
          weight: nextNorm,
          eps,
          out: b.x,
          residualOut: b.residual,
        });
      });
    });
  }

  /** Whether the decode step can run {@link decodeFused}: the built-in fused RMSNorm, MLP and RoPE. */
  function fullyFused(): boolean {
    const { names } = table;
    return names.rmsnorm === 'fused' && names.mlp === 'fused' && names.rope === 'fused';
  }

  /**
   * The decode step with every RMSNorm folded into the GEMV after it (seven kernels per layer): the GEMV blocks
   * normalise the 1-row input themselves, and the residual add rides along, written once by one block. The add's
   * output cannot overwrite the input every block is still reading, so the residual stream alternates between
   * `residual` (embedding row; the sum before each layer's QKV) and `residualAlt` (the sum before each MLP).
   */
  function decodeFused(b: StepBuffers): void {
    const m = table.modules;
    layers.forEach((layer, i) => {
      // `b.x` is free in this step: a quantized projection normalises its input into it (see normProject).
      if (i === 0) normProject(b.residual, layer.inputNorm, layer.qkv, { eps, out: b.qkv, normed: b.x });
      else {
        normProject(b.mlp, layer.inputNorm, layer.qkv, {
          eps,
          residual: b.residualAlt,
          residualOut: b.residual,
          out: b.qkv,
          normed: b.x,
        });
      }
      appendAttentionInputs(layer, b.qkv, b.position, b.q);
      withViews((view) => {
        m.attention({
          q: b.q,
          k: view(layer.kCache.slice(0, stepRows)),
          v: view(layer.vCache.slice(0, stepRows)),
          kvLength: b.length,
          positionOffset: 0,
          workspace,
          out: b.attn,
        });
        project(view(b.attn.reshape([1, H * D])), layer.o, b.o);
      });
      normProject(b.o, layer.postNorm, layer.gateUp, {
        eps,
        residual: b.residual,
        residualOut: b.residualAlt,
        glu: true,
        out: b.h,
        normed: b.x,
      });
      project(b.h, layer.down, b.mlp);
    });
    rmsnormLinear(b.mlp, norm, lmHead, { eps, residual: b.residualAlt, out: b.logits });
  }

  function stepBuffers(): StepBuffers {
    if (step !== null) return step;
    const state = Tensor.empty([3], 'i32', 'cuda');
    const logits = Tensor.empty([1, vocabSize], dtype, 'cuda');
    step = {
      state,
      id: state.slice(0, 1),
      position: state.slice(1, 2),
      length: state.slice(2, 3),
      residual: Tensor.empty([1, hidden], dtype, 'cuda'),
      residualAlt: Tensor.empty([1, hidden], dtype, 'cuda'),
      x: Tensor.empty([1, hidden], dtype, 'cuda'),
      qkv: Tensor.empty([1, (H + 2 * KV) * D], dtype, 'cuda'),
      q: Tensor.empty([1, H, D], dtype, 'cuda'),
      k: Tensor.empty([1, KV, D], dtype, 'cuda'),
      attn: Tensor.empty([1, H, D], dtype, 'cuda'),
      o: Tensor.empty([1, hidden], dtype, 'cuda'),
      h: Tensor.empty([1, config.intermediateSize], dtype, 'cuda'),
      mlp: Tensor.empty([1, hidden], dtype, 'cuda'),
      logits,
      next: Tensor.empty([], 'i32', 'cuda'),
    };
    return step;
  }

  /** The decode step on the step buffers: embed `state.id`, the layers, LM head, argmax into `next`. */
  function decodeStep(): void {
    const b = stepBuffers();
    embedding(b.id, embed, { out: b.residual });
    if (fullyFused()) decodeFused(b);
    else {
      runLayers(table.modules, b, 1, 0, b.length);
      linear(b.x, lmHead, { out: b.logits });
    }
    // `sample`'s greedy path is the argmax kernel that also refuses the row (id −1) when it holds NaN or +∞: the
    // same read of the logits, so the non-finite check is free (see nonfinite.ts).
    withViews((view) =>
      sample(view(view(b.logits.reshape([vocabSize])).slice(0, vocabLimit)), {
        temperature: 0,
        out: b.next,
        checkIds: false,
      }),
    );
  }

  /** The cache rows a decode step at `position` attends over: a power of two ≥ 256 above it, at most maxContext. */
  function decodeRows(position: number): number {
    let rows = 256;
    while (rows <= position) rows *= 2;
    return Math.min(rows, maxContext);
  }

  /** Runs one decode step at `position` through its bucket's captured graph (capturing it on first use). */
  function decode(id: number, position: number): StepBuffers {
    const b = stepBuffers();
    b.state.copyFrom(Tensor.fromStorage(Int32Array.of(id, position, position + 1), [3], 'i32'));
    stepRows = decodeRows(position);
    const graph = graphs.get(stepRows);
    if (graph === undefined) {
      decodeStep(); // eager first: warms the allocator's cache and any lazily built kernel state
      graphs.set(stepRows, CudaGraph.capture(decodeStep));
    } else {
      graph.replay();
    }
    return b;
  }

  /**
   * Prefill of `ids` at `start…`, at most `prefillChunk` tokens per pass: fills the cache; returns the last
   * position's logits `[1, vocab]` (a new tensor).
   */
  function prefill(ids: readonly number[], start: number): T {
    const n = ids.length;
    for (let c = 0; c + prefillChunk < n; c += prefillChunk) {
      prefillPass(ids.slice(c, c + prefillChunk), start + c, false);
    }
    const last = Math.floor((n - 1) / prefillChunk) * prefillChunk;
    return prefillPass(ids.slice(last), start + last, true)!;
  }

  /** `run()`, with a device out-of-memory turned into the prefill's own error (what to make smaller). */
  function prefillOrExplain<R>(run: () => R, tokens: number): R {
    try {
      return run();
    } catch (e) {
      if (!(e instanceof QkOutOfMemoryError)) throw e;
      throw prefillOutOfMemory(op, e, { tokens, chunk: prefillChunk });
    }
  }

  /** One prefill pass over `ids` at `start…`; with `logits`, returns the last position's logits (a new tensor). */
  function prefillPass(ids: readonly number[], start: number, logits: boolean): T | null {
    const n = ids.length;
    const positions = Tensor.fromStorage(
      Int32Array.from(ids, (_, i) => start + i),
      [n],
      'i32',
    ).to('cuda');
    const residual = embedding(ids, embed);
    const buffers = {
      position: positions,
      residual,
      x: Tensor.empty([n, hidden], dtype, 'cuda'),
      q: Tensor.empty([n, H, D], dtype, 'cuda'),
      k: Tensor.empty([n, KV, D], dtype, 'cuda'),
      attn: Tensor.empty([n, H, D], dtype, 'cuda'),
      o: Tensor.empty([n, hidden], dtype, 'cuda'),
      mlp: Tensor.empty([n, hidden], dtype, 'cuda'),
    };
    try {
      runLayers(table.modules, { ...buffers, qkv: null }, n, start, null);
      return logits ? withViews((view) => linear(view(buffers.x.slice(n - 1)), lmHead)) : null;
    } finally {
      for (const t of Object.values(buffers)) t.dispose();
    }
  }

  /**
   * Runs `ids` at `start…`; returns the logits of the last one: the step's buffer, or a new tensor (`owned`). The
   * work is queued, not waited for: `settled()` throws if a megakernel step failed on the device, and must be
   * called once whatever was read from the logits has been copied back (work queued after the step, such as
   * sampling, then overlaps it instead of waiting for it on the host).
   */
  function forward(
    ids: readonly number[],
    start: number,
  ): { logits: T; owned: boolean; greedy: () => number; settled: () => void } {
    checkForwardArgs(op, config, maxContext, filled, ids, start);
    ahead = null; // a step launched ahead is superseded: this one runs after it on the stream
    if (ids.length === 1 && megakernel !== null && start < megakernelUntil) {
      const mk = megakernel;
      mk.step(ids[0]!, start);
      filled = start + 1;
      return { logits: mk.logits, owned: false, greedy: () => mk.result(), settled: () => void mk.result() };
    }
    const settled = () => {};
    if (ids.length === 1) {
      const b = decode(ids[0]!, start);
      filled = start + 1;
      return { logits: b.logits, owned: false, greedy: () => b.next.item(), settled };
    }
    const logits = prefillOrExplain(() => prefill(ids, start), ids.length);
    filled = start + ids.length;
    return {
      logits,
      owned: true,
      greedy: () => greedyToken(logits),
      settled,
    };
  }

  /** Whether the decode step at `position` runs in the megakernel (else in the layered graph). */
  const inMegakernel = (position: number) => megakernel !== null && position < megakernelUntil;

  /**
   * Queues decode steps from `id` at `position`: one megakernel launch of up to `megakernelSteps` steps (stopping
   * at the hand-off position), greedy or drawing by `draw` (step k with the uniform of step index
   * `draw.step + k`), or one greedy replay of the layered graph. Returns the steps queued.
   */
  function queueDecode(id: number, position: number, draw: Draw | null, most: number): number {
    if (megakernel === null || !inMegakernel(position)) {
      decode(id, position);
      return 1;
    }
    const steps = Math.min(
      megakernelSteps,
      megakernel.maxSteps,
      maxContext - position,
      megakernelUntil - position,
      Math.max(1, most),
    );
    if (draw === null) megakernel.launch(id, position, steps);
    else {
      const { temperature, topK, topP, seed } = draw.sampling;
      // The uniform `sample` draws for one row with the step's seed: the first of a fresh generator's stream.
      const uniforms = Float64Array.from({ length: steps }, (_, k) =>
        new Rng(stepSeed(seed, draw.step + k)).nextFloat(),
      );
      megakernel.launch(id, position, steps, { temperature, topK, topP, uniforms });
    }
    return steps;
  }

  /** Waits for step `index` of the steps queued last (in the megakernel or not) and returns its greedy token. */
  function queuedToken(index: number, fromMegakernel: boolean): number {
    return fromMegakernel && megakernel !== null ? megakernel.token(index) : stepBuffers().next.item();
  }

  /**
   * Decode of one token, greedy (`draw` null) or sampled in the megakernel: claims a queued step when it is this one
   * (the next position, fed the token the step before it made, drawing the same way with the next step index), or
   * queues steps from here; once the last queued step is read, queues the steps after it before returning the
   * token. The layered graph queues ahead only greedy steps, and only when that step's bucket graph is already
   * captured; the megakernel always can, since the kernel leaves [token, position] of the next step on the device
   * and nothing is uploaded.
   */
  function nextQueuedDecode(
    id: number,
    position: number,
    draw: Draw | null,
    stepIndex: number,
    lastStep: number | undefined,
  ): number {
    checkForwardArgs(op, config, maxContext, filled, [id], position);
    // Steps the caller may still ask for, this one included (unbounded without a last step).
    const left = (step: number) => (lastStep === undefined ? Number.POSITIVE_INFINITY : lastStep - step + 1);
    const k = ahead === null ? -1 : position - ahead.position;
    let queued = ahead;
    if (
      queued === null ||
      k < 0 ||
      k >= queued.inputs.length ||
      queued.inputs[k] !== id ||
      !sameDraw(queued.draw, draw, k)
    ) {
      ahead = null;
      queued = {
        position,
        steps: queueDecode(id, position, draw, left(stepIndex)),
        inputs: [id],
        inMegakernel: inMegakernel(position),
        draw,
      };
      ahead = queued;
    }
    const index = position - queued.position;
    let token: number;
    try {
      token = queuedToken(index, queued.inMegakernel);
    } catch (e) {
      ahead = null;
      throw e;
    }
    filled = position + 1;
    if (token < 0) {
      // Refused logits (the layered graph's checked argmax): nothing may be fed this id; the caller reports it.
      ahead = null;
      return token;
    }
    if (index + 1 < queued.steps) {
      queued.inputs.length = index + 1;
      queued.inputs.push(token);
      return token;
    }
    ahead = null;
    const following = position + 1;
    const then = draw === null ? null : { sampling: draw.sampling, step: draw.step + 1 };
    if (
      following < maxContext &&
      left(stepIndex + 1) > 0 &&
      (inMegakernel(following) || (draw === null && graphs.has(decodeRows(following))))
    ) {
      try {
        ahead = {
          position: following,
          steps: queueDecode(token, following, then, left(stepIndex + 1)),
          inputs: [token],
          inMegakernel: inMegakernel(following),
          draw: then,
        };
      } catch {
        // This token is already computed and is returned; the steps after it run again when they are asked for, and
        // a failure that persists is reported then, by that call.
        ahead = null;
      }
    }
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
      ahead = null; // as in forward(): this pass overwrites what queued steps wrote
      prefillOrExplain(() => prefillPass(chunk, start + c, false), ids.length);
      cudaSynchronize();
      filled = start + c + chunk.length;
      await between();
      live('nextAsync'); // disposed while it waited: stop here
    }
    return step(ids.slice(last), start + last);
  }

  const patchable: Pick<Engine, 'variants' | 'patch'> = {
    variants: () => listVariants(),
    patch(spec: PatchSpec) {
      live('patch');
      const previous = table;
      table = resolvePatch(table, spec);
      invalidateGraph();
      return () => {
        if (disposed) return;
        table = previous;
        invalidateGraph();
      };
    },
  };
  const engine: Engine & PiecewiseEngine = {
    name: megakernel === null ? 'layered' : 'megakernel',
    ...(megakernel === null ? {} : { lmScreen: megakernel.screened }),
    weightInfo: weightInfo(layers, [
      embed,
      lmHead,
      norm,
      ...layers.flatMap((l) => [l.inputNorm, l.qNorm, l.kNorm, l.postNorm]),
    ]),
    config,
    dtype,
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
    chooseAsync(ids, start, sampling: SamplingParams, stepIndex, controls, between) {
      live('chooseAsync');
      checkSampling(op, sampling);
      checkStepControls(op, controls);
      return piecewise(ids, start, between, (rest, at) =>
        engine.choose!(rest, at, sampling, stepIndex, controls),
      );
    },
    // The megakernel's decode step is one fixed kernel: nothing to swap.
    ...(megakernel === null ? patchable : {}),
    dispose() {
      if (disposed) return;
      disposed = true;
      invalidateGraph();
      const summary = megakernel?.traceSummary();
      megakernel?.dispose();
      sampler?.dispose();
      if (step !== null) for (const t of Object.values(step)) t.dispose();
      const seen = new Set<Tensor>();
      for (const l of layers) for (const t of layerTensors(l)) seen.add(t);
      for (const t of [embed, norm, lmHead, workspace]) seen.add(t);
      for (const t of seen) t.dispose();
      // (after everything is freed: a callback that throws leaks nothing)
      if (summary && onTrace !== undefined) onTrace(summary);
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
      return nextQueuedDecode(ids[0]!, start, null, stepIndex, sampling.lastStep);
    }
    if (ids.length === 1 && inMegakernel(start) && sampledInKernel(sampling)) {
      return nextQueuedDecode(ids[0]!, start, { sampling, step: stepIndex }, stepIndex, sampling.lastStep);
    }
    const r = forward(ids, start);
    const views: Tensor[] = [];
    try {
      if (sampling.temperature === 0) return r.greedy();
      const flat = r.logits.reshape([vocabSize]);
      const row = flat.slice(0, vocabLimit);
      views.push(flat, row);
      let token: number;
      try {
        token = itemOf(
          sample(row, {
            temperature: sampling.temperature,
            topK: sampling.topK,
            topP: sampling.topP,
            seed: stepSeed(sampling.seed, stepIndex),
          }),
        );
      } catch (e) {
        r.settled(); // a failed megakernel step explains refused logits as well as `sample` does
        throw e;
      }
      r.settled();
      return token;
    } finally {
      for (const v of views) v.dispose();
      if (r.owned) r.logits.dispose();
    }
  }

  /** The token of {@link Engine.choose}, by the controls (see {@link finiteToken}). */
  function chooseToken(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    stepIndex: number,
    controls: StepControls,
  ): SampledToken {
    const r = forward(ids, start);
    const views: Tensor[] = [];
    try {
      sampler ??= new DeviceSampler(vocabLimit);
      const flat = r.logits.reshape([vocabSize]);
      const slice = flat.slice(0, vocabLimit);
      const row = slice.reshape([1, vocabLimit]);
      views.push(flat, slice, row);
      let token: SampledToken;
      try {
        token = sampler.choose(row, sampling, stepIndex, controls);
      } catch (e) {
        r.settled(); // a failed megakernel step explains bad logits better than the sampler can
        throw e;
      }
      r.settled();
      return token;
    } finally {
      for (const v of views) v.dispose();
      if (r.owned) r.logits.dispose();
    }
  }

  function invalidateGraph(): void {
    ahead = null;
    for (const g of graphs.values()) g.dispose();
    graphs.clear();
  }
}

/** The one element of a result tensor, which is then freed (not left to the garbage collector's finalizer). */
function itemOf(t: Tensor): number {
  try {
    return t.item();
  } finally {
    t.dispose();
  }
}
