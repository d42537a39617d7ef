/**
 * The `megakernel` engine: decode steps in the Qwen3 decode megakernel (kernel.ts) over the layered engine's weights
 * and KV cache, up to the hand-off position (`megakernelUntil`), and in the layered graph from there on; prefill stays
 * with the layered kernels (layered-stack.ts). Greedy steps, and sampled ones with a top-k of at most 64, run several
 * per launch (`megakernelSteps`) and queue ahead of the caller (decode-queue.ts): each step's token feeds the next on
 * the device and reaches the host as soon as it is made. A sampled step draws in the kernel with the uniform of its
 * step's seed, by `sample`'s rule, so it gives the token `sample` would give on its logits. A step whose controls are
 * a constraint's mask, penalties or min-p runs masked (`masked`): queued ahead like the others, each waiting at its LM
 * head for the mask the host computes while its layers run (every id allowed without a constraint), the penalties
 * applied in the kernel from the history uploaded when the steps were queued. Other steps (a larger or no top-k, a
 * logit bias, log-probabilities, `logits()`) run one per launch, writing their full logits row.
 */
import { QkValueError, Rng } from '@qk/ops';
import type { PiecewiseEngine } from '../../generation/generation.js';
import type { Engine, Qwen3Config, Qwen3Weights, SamplingParams, TokenHistory } from '../../types.js';
import { stepSeed } from '../common.js';
import type { DecodeLane } from '../decode-queue.js';
import { createGpuEngine, type KernelDecoder } from '../gpu-engine.js';
import { checkLayeredOptions, type LayeredEngineOptions } from '../layered-options.js';
import { createLayeredStack, type LayeredStack } from '../layered-stack.js';
import { isQuantized, type Projection } from '../projections.js';
import { hasPenalties, historyArrays } from '../sampling.js';
import {
  type MegakernelControls,
  type MegakernelProjection,
  type MegakernelSampling,
  type MegakernelWeightFormat,
  Qwen3Megakernel,
} from './kernel.js';
import type { MegakernelEngineOptions } from './options.js';
import { checkMegakernelTuning } from './tuning.js';

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

/** Whether the megakernel draws tokens by these parameters itself (a top-k of at most 64; temperature > 0). */
export function sampledInKernel(s: Pick<SamplingParams, 'temperature' | 'topK'>): boolean {
  return s.temperature > 0 && s.topK >= 1 && s.topK <= Qwen3Megakernel.MAX_TOP_K;
}

/**
 * How a launch of `steps` steps draws by `sampling` in the kernel, step k with the uniform `sample` draws for one row
 * with the seed of generation step `step + k` (the first of a fresh generator's stream).
 */
function kernelDraw(sampling: SamplingParams, step: number, steps: number): MegakernelSampling {
  const { temperature, topK, topP, seed } = sampling;
  const uniforms = Float64Array.from({ length: steps }, (_, k) =>
    new Rng(stepSeed(seed, step + k)).nextFloat(),
  );
  return { temperature, topK, topP, uniforms };
}

/** The logit controls `sampling` asks of the kernel, or undefined when it asks for none. */
function kernelControls(sampling: SamplingParams): MegakernelControls | undefined {
  if (!hasPenalties(sampling) && (sampling.minP ?? 0) === 0) return undefined;
  return {
    repetitionPenalty: sampling.repetitionPenalty ?? 1,
    presencePenalty: sampling.presencePenalty ?? 0,
    frequencyPenalty: sampling.frequencyPenalty ?? 0,
    minP: sampling.minP ?? 0,
  };
}

/**
 * The state a penalised launch starts from for `history` over `vocab` ids: the counts of the generated ids, and the
 * ids seen (the prompt's and the generated ones) as bit words.
 */
function kernelHistory(history: TokenHistory, vocab: number): { counts: Int32Array; seen: Uint32Array } {
  const host = historyArrays(history, vocab);
  const seen = new Uint32Array(host.promptTokens.length);
  seen.set(host.promptTokens);
  for (const t of history.generated) if (t >= 0 && t < vocab) seen[t >>> 5]! |= 1 << (t & 31);
  return { counts: host.counts, seen };
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

/** A layer projection as the megakernel reads it: the bf16 tensor, or the quantized codes, scales and offsets. */
function kernelProjection(p: Projection): MegakernelProjection {
  if (!isQuantized(p)) return p;
  const { qweight, scales } = p.weight;
  const offsets = p.bits === 4 ? p.zeroPoints?.offsets : undefined;
  return offsets === undefined ? { qweight, scales } : { qweight, scales, offsets };
}

/** The format of a stack's projections, as the megakernel takes it (every layer's is the same). */
function kernelWeights(stack: LayeredStack): MegakernelWeightFormat {
  const p = stack.layers[0]?.qkv;
  if (p === undefined || !isQuantized(p)) return { bits: 16 };
  if (p.bits === 8) return { bits: 8 };
  return { bits: 4, groupSize: p.weight.groupSize, zeroPoints: p.zeroPoints !== undefined };
}

/**
 * The `megakernel` engine over `weights` (bf16 on the GPU, which it takes ownership of: `engine.dispose()` frees
 * them). It has no swappable modules. With `quantized` layers (INT8, INT4, AWQ/GPTQ repacked), the layered kernels
 * prefill through the quantized ops and the megakernel streams the same codes, dequantising them under its loads.
 *
 * @throws QkDeviceError for weights that are not on the GPU, or a GPU or addon that cannot run the megakernel;
 *   QkValueError for an option out of range or sizes the megakernel does not serve; QkMemoryError when the KV cache
 *   (`maxContext`) does not fit.
 */
export function createMegakernelEngine(
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: LayeredEngineOptions & MegakernelEngineOptions,
): Engine & PiecewiseEngine {
  const op = 'layeredEngine'; // (the operation both GPU engines' errors name: their checks are shared)
  const settings = checkLayeredOptions(op, config, weights, options);
  const { maxContext } = settings;
  const megakernelSteps = integerOption(
    op,
    'megakernelSteps',
    options.megakernelSteps,
    () => 4,
    1,
    Qwen3Megakernel.MAX_STEPS,
  );
  const megakernelUntil = integerOption(
    op,
    'megakernelUntil',
    options.megakernelUntil,
    () => megakernelHandoff(config),
    0,
  );
  // Checked here, before any allocation, so that the error names the engine's option.
  const megakernelTuning = checkMegakernelTuning(op, options.megakernelTuning);
  const onTrace = options.megakernelTrace;

  const stack: LayeredStack = createLayeredStack(
    op,
    'megakernel',
    config,
    weights,
    settings,
    options.quantized,
  );
  let megakernel: Qwen3Megakernel;
  try {
    megakernel = new Qwen3Megakernel({
      hidden: config.hiddenSize,
      qHeads: config.numHeads,
      kvHeads: config.numKvHeads,
      ffn: config.intermediateSize,
      layers: stack.layers.length,
      vocab: config.vocabSize,
      weights: kernelWeights(stack),
      layerTensors: stack.layers.map((l) => ({
        ...l,
        qkv: kernelProjection(l.qkv),
        o: kernelProjection(l.o),
        gateUp: kernelProjection(l.gateUp),
        down: kernelProjection(l.down),
      })),
      embed: stack.embed,
      finalNorm: stack.norm,
      lmHead: stack.lmHead,
      eps: config.rmsNormEps,
      ropeTheta: config.ropeTheta,
      maxContext,
      vocabLimit: settings.vocabLimit,
      trace: onTrace !== undefined,
      screen: options.megakernelScreen,
      tuning: megakernelTuning,
    });
  } catch (e) {
    stack.fail(e);
  }
  const mk = megakernel;

  const lane: DecodeLane = {
    queue(id, position, draw, most) {
      const steps = Math.min(
        megakernelSteps,
        mk.maxSteps,
        maxContext - position,
        megakernelUntil - position,
        Math.max(1, most),
      );
      mk.launch(id, position, steps, draw === null ? undefined : kernelDraw(draw.sampling, draw.step, steps));
      return steps;
    },
    token: (index) => mk.token(index),
    runsAhead: () => true,
  };
  const decoder: KernelDecoder = {
    name: 'megakernel',
    lmScreen: mk.screened,
    covers: (position) => position < megakernelUntil,
    lane,
    step(id, position) {
      mk.step(id, position);
      return { logits: mk.logits, owned: false, greedy: () => mk.result(), settled: () => void mk.result() };
    },
    draws: sampledInKernel,
    masked: {
      takes: (sampling) =>
        (sampling.temperature === 0 || sampledInKernel(sampling)) && (sampling.logitBias?.size ?? 0) === 0,
      queue(id, position, sampling, stepIndex, most, history) {
        // The kernel draws with a top-k of at most 64, and applies penalties and min-p, not a logit bias. As many steps
        // as one launch runs: the ones the generation does not ask for are cancelled at their mask wait.
        if (!decoder.masked!.takes(sampling)) return 0;
        const steps = Math.min(mk.maxSteps, maxContext - position, megakernelUntil - position, most);
        if (steps < 1) return 0;
        const controls = kernelControls(sampling);
        if (hasPenalties(sampling)) {
          if (history === null) return 0;
          const { counts, seen } = kernelHistory(history, config.vocabSize);
          mk.history(counts, seen);
        }
        const draw = sampling.temperature === 0 ? undefined : kernelDraw(sampling, stepIndex, steps);
        mk.launch(id, position, steps, draw, { masked: true, controls });
        return steps;
      },
      token: (index, words) => (mk.mask(index, words) ? mk.token(index) : null),
      cancel: () => mk.cancel(),
    },
    dispose() {
      const summary = mk.traceSummary();
      mk.dispose();
      return summary && onTrace !== undefined ? () => onTrace(summary) : undefined;
    },
  };
  return createGpuEngine(op, stack, decoder);
}
