/**
 * Weight-only quantization of a Qwen3 model's decoder linears (q/k/v/o/gate/up/down) with the `@qk/ops` quantizers:
 * INT8 per output channel, INT4 in groups (128 by default) along the input. The embedding, the LM head and every
 * norm keep their float dtype: at batch 1 the LM head's error lands on every logit directly, and at 8B the
 * embedding and LM head are a small share of the bytes (~1.2 of ~16.4 GB), so quantizing them buys little and
 * costs the most quality.
 */
import {
  type Device,
  type DType,
  type FloatDType,
  type Int4Weight,
  type Int8Weight,
  linear,
  linearInt4,
  linearInt8,
  QkOutOfMemoryError,
  QkValueError,
  quantizeInt4,
  quantizeInt8,
  type Tensor,
} from '@qk/ops';
import { checkWeightsMatchConfig, expectedWeightShapes } from '../engine/common.js';
import type { LayerWeights, Qwen3Config, Qwen3Weights } from '../types.js';

/** The quantized weight formats a model can load with. `'bf16'` is the unquantized one. */
export type WeightFormat = 'bf16' | 'int8' | 'int4';

/** The keys of {@link LayerWeights} that are linear projections, quantized by {@link quantizeLinears}. */
export const LINEAR_KEYS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LinearKey = (typeof LINEAR_KEYS)[number];

/** One quantized projection. */
export type QuantizedLinear =
  | { readonly bits: 8; readonly weight: Int8Weight }
  | {
      readonly bits: 4;
      readonly weight: Int4Weight;
      /**
       * Zero-point checkpoints (AWQ, GPTQ; see external.ts): `[out, in/groupSize]`, added as
       * `w[o, k] = q·scale + offsets[o, ⌊k/groupSize⌋]`. Absent for our symmetric INT4.
       */
      readonly offsets?: Tensor<'f32'>;
    };

/** The quantized projections of one decoder layer. */
export type QuantizedLayer = Readonly<Record<LinearKey, QuantizedLinear>>;

/** Options of {@link quantizeLinears}. */
export interface QuantizeOptions {
  readonly bits: 8 | 4;
  /** INT4 group size along the input (default 128; 64 also fits every Qwen3 shape). Ignored for INT8. */
  readonly groupSize?: number;
  /** Called after each projection is quantized. */
  readonly onProgress?: (done: number, total: number, tensor: string) => void;
}

/** A quantization that cannot be done or produced unusable scales (NaN/±Inf); `tensor` names the weight. */
export class QkQuantizationError extends QkValueError {
  readonly tensor: string;
  constructor(tensor: string, message: string) {
    super('quantize', tensor, message);
    this.tensor = tensor;
  }
}

/** HF name of a layer projection, for messages. */
export function linearName(layer: number, key: LinearKey): string {
  const part = key === 'gate' || key === 'up' || key === 'down' ? 'mlp' : 'self_attn';
  return `model.layers.${layer}.${part}.${key}_proj.weight`;
}

/** Parses a weight format name; throws `QkValueError` naming `op` otherwise. */
export function checkWeightFormat(op: string, value: unknown): WeightFormat {
  if (value === 'bf16' || value === 'int8' || value === 'int4') return value;
  throw new QkValueError(op, 'weights', `must be "bf16", "int8" or "int4", got ${JSON.stringify(value)}.`);
}

/** The INT4 group size where none is given: inputs per scale. */
export const DEFAULT_GROUP_SIZE = 128;

/** Quantizes one `[out, in]` weight; refuses non-finite values or scales with {@link QkQuantizationError}. */
export function quantizeLinear(
  name: string,
  weight: Tensor<FloatDType>,
  bits: 8 | 4,
  groupSize = DEFAULT_GROUP_SIZE,
): QuantizedLinear {
  let q: QuantizedLinear;
  try {
    q =
      bits === 8
        ? { bits: 8, weight: quantizeInt8(weight) }
        : { bits: 4, weight: quantizeInt4(weight, { groupSize }) };
  } catch (e) {
    // Running out of GPU memory says nothing about the weight: loadQwen3 reports it as a memory error.
    if (e instanceof QkQuantizationError || e instanceof QkOutOfMemoryError) throw e;
    const why = e instanceof Error ? e.message : String(e);
    throw new QkQuantizationError(name, `cannot be quantized to int${bits}: ${why}`);
  }
  // Scales made on the GPU (a CUDA weight) are read back for the check: the kernel cannot throw, it writes NaN.
  const scales = q.weight.scales.toFloat32Array();
  for (let i = 0; i < scales.length; i++) {
    if (!Number.isFinite(scales[i]!)) {
      q.weight.qweight.dispose();
      q.weight.scales.dispose();
      throw new QkQuantizationError(
        name,
        `quantizing to int${bits} gave a non-finite scale at index ${i}; the weight holds values too large for float32 scales. Keep this model in bf16.`,
      );
    }
  }
  return q;
}

/**
 * Quantizes every decoder projection of `weights` (which it does not dispose). Throws
 * {@link QkQuantizationError} naming the first tensor that cannot be quantized (nothing made so far leaks).
 */
export function quantizeLinears(weights: Qwen3Weights, options: QuantizeOptions): QuantizedLayer[] {
  const { bits, groupSize = DEFAULT_GROUP_SIZE, onProgress } = options;
  const total = weights.layers.length * LINEAR_KEYS.length;
  const layers: QuantizedLayer[] = [];
  let done = 0;
  try {
    weights.layers.forEach((layer: LayerWeights, i) => {
      const out = {} as Record<LinearKey, QuantizedLinear>;
      try {
        for (const key of LINEAR_KEYS) {
          const name = linearName(i, key);
          out[key] = quantizeLinear(name, layer[key], bits, groupSize);
          onProgress?.(++done, total, name);
        }
      } catch (e) {
        disposeQuantizedLayers([out as QuantizedLayer]);
        throw e;
      }
      layers.push(out);
    });
  } catch (e) {
    disposeQuantizedLayers(layers);
    throw e;
  }
  return layers;
}

/** `x · Wᵀ` through the `@qk/ops` reference of the quantized weight's format. */
export function quantLinear<D extends FloatDType>(x: Tensor<D>, q: QuantizedLinear): Tensor<D> {
  if (q.bits === 8) return linearInt8(x, q.weight);
  if (q.offsets === undefined) return linearInt4(x, q.weight);
  // linearInt4 over the codes, plus Σ_g offset[o, g] · Σ_{k∈g} x[k], in float64 per output.
  const xf = (x.dtype === 'f32' ? x : x.to('f32')) as Tensor<'f32'>;
  const y = linearInt4(xf, q.weight);
  const g = q.weight.groupSize;
  const n = xf.shape[xf.rank - 1]!;
  const groups = n / g;
  const outFeatures = q.weight.qweight.shape[0]!;
  const rows = xf.size / n;
  const xs = xf.data;
  const ys = y.data;
  const off = q.offsets.data;
  const sums = new Float64Array(groups);
  for (let r = 0; r < rows; r++) {
    sums.fill(0);
    for (let k = 0; k < n; k++) sums[Math.floor(k / g)]! += xs[r * n + k]!;
    for (let o = 0; o < outFeatures; o++) {
      let c = 0;
      for (let gi = 0; gi < groups; gi++) c += off[o * groups + gi]! * sums[gi]!;
      ys[r * outFeatures + o] = ys[r * outFeatures + o]! + c;
    }
  }
  if (xf === (x as Tensor)) return y as unknown as Tensor<D>;
  xf.dispose();
  const back = y.to(x.dtype) as Tensor<D>;
  y.dispose();
  return back;
}

/** `x · Wᵀ` with a float or quantized weight. */
export function anyLinear<D extends FloatDType>(x: Tensor<D>, w: Tensor<D> | QuantizedLinear): Tensor<D> {
  return 'bits' in w ? quantLinear(x, w) : linear(x, w);
}

/** `t` on `device`: itself when it is there, else a copy there (and `t` is freed). */
export function placed<D extends DType>(t: Tensor<D>, device: Device): Tensor<D> {
  if (t.device === device) return t;
  const moved = t.to(device);
  t.dispose();
  return moved;
}

/** `q` with its tensors on `device` (those moved are freed where they were). */
export function quantizedOn(q: QuantizedLinear, device: Device): QuantizedLinear {
  if (q.bits === 8) {
    return {
      bits: 8,
      weight: { qweight: placed(q.weight.qweight, device), scales: placed(q.weight.scales, device) },
    };
  }
  return {
    bits: 4,
    weight: {
      qweight: placed(q.weight.qweight, device),
      scales: placed(q.weight.scales, device),
      groupSize: q.weight.groupSize,
    },
    ...(q.offsets === undefined ? {} : { offsets: placed(q.offsets, device) }),
  };
}

/** Frees the tensors of quantized layers (partial ones too). */
export function disposeQuantizedLayers(layers: readonly Partial<QuantizedLayer>[]): void {
  for (const layer of layers) {
    for (const q of Object.values(layer)) {
      if (q === undefined) continue;
      q.weight.qweight.dispose();
      q.weight.scales.dispose();
      if (q.bits === 4) q.offsets?.dispose();
    }
  }
}

/**
 * The shape checks of an engine given quantized projections: the float tensors as `checkWeightsMatchConfig` does
 * (the float projections may be absent), and each quantized projection's `[out, in]` against the config.
 */
export function checkQuantizedWeights(
  op: string,
  config: Qwen3Config,
  weights: Qwen3Weights,
  quantized: readonly QuantizedLayer[],
): void {
  if (quantized.length !== config.numLayers) {
    throw new QkValueError(
      op,
      'quantized',
      `holds ${quantized.length} layers but the model has ${config.numLayers}.`,
    );
  }
  const shapes = expectedWeightShapes(config).layer;
  const linear = new Set<string>(LINEAR_KEYS);
  // Check the float tensors through the shared check, with each projection stood in for by its own shape.
  const standIn = (shape: readonly number[]) => ({ shape, rank: shape.length }) as unknown as Tensor;
  checkWeightsMatchConfig(op, config, {
    ...weights,
    layers: weights.layers.map((l) => {
      const out: Record<string, Tensor> = {};
      for (const [key, t] of Object.entries(l)) if (!linear.has(key)) out[key] = t;
      for (const key of LINEAR_KEYS) out[key] = standIn(shapes[key]!);
      return out as unknown as LayerWeights;
    }),
  });
  quantized.forEach((layer, i) => {
    for (const key of LINEAR_KEYS) {
      const q = layer[key];
      const [out, n] = shapes[key]! as [number, number];
      const rows = q?.weight.qweight.shape[0];
      const cols = q === undefined ? undefined : q.weight.qweight.shape[1]! * (q.bits === 4 ? 2 : 1);
      if (rows !== out || cols !== n) {
        throw new QkValueError(
          op,
          `quantized[${i}].${key}`,
          `must quantize a [${out}, ${n}] weight, got ${q === undefined ? 'nothing' : `[${rows}, ${cols}]`}.`,
        );
      }
    }
  });
}

/** Frees every float tensor of `weights` once, tolerating absent projections (a quantized checkpoint's weights). */
export function disposeFloatWeights(weights: Qwen3Weights): void {
  const seen = new Set<Tensor>([weights.embed, weights.norm, weights.lmHead]);
  for (const layer of weights.layers)
    for (const t of Object.values(layer) as (Tensor | undefined)[]) if (t !== undefined) seen.add(t);
  for (const t of seen) t.dispose();
}
