/**
 * The decoder projections of the layered engine — q|k|v fused, o, gate|up fused, down — float or weight-only
 * quantized, and the functions that apply them.
 *
 * Quantized projections stay quantized in GPU memory: INT8 codes with one f32 scale per output channel, INT4 codes
 * (two per byte) with one f32 scale per group of inputs, applied by the `@qk/ops` ops `linearInt8` / `linearInt4`
 * (a GEMV for a decode step, the same ops for a prefill's many rows). Nothing is dequantized to bf16 in memory. The
 * embedding, the LM head and the norms stay in the float dtype, as the quantized checkpoint keeps them (see
 * quant/quantize.ts for why).
 *
 * Fusion. A float decode step folds the residual add and RMSNorm into the QKV and gate/up GEMVs and SwiGLU into the
 * gate/up GEMV's epilogue (`rmsnormLinear`: seven kernels per layer). The quantized GEMVs have no norm prologue or
 * SwiGLU epilogue, so {@link normProject} runs a quantized step's pieces one after the other: add + RMSNorm (one
 * kernel) into a scratch row, the quantized GEMV, and for gate/up `swigluFused` over its `[gate | up]` output. That
 * is nine kernels per layer instead of seven, all inside the same captured CUDA graph; the residual stream and the
 * buffers are the float step's, so the graph, the cache-row buckets and the run-ahead greedy decode are unchanged.
 *
 * Zero points. AWQ and GPTQ checkpoints are repacked at load into our INT4 codes plus one offset per row and group
 * (quant/external.ts: `w[o, k] = q·scale + offset[o, ⌊k/g⌋]`). Their projection adds `Σ_g offset[o, g] · S_g(x)`,
 * where `S_g(x)` is the sum of the inputs of group g: {@link project} computes the sums with one small GEMM against
 * a 0/1 group-indicator matrix `[groups, in]` (one per input width, shared by every layer), multiplies them by the
 * offsets `[out, groups]` with another, and adds — three small kernels and about 1/64 more bytes at group size 128,
 * where a second INT4 pass with the offsets as scales would read the codes' bytes twice. The sums and offsets are
 * rounded to the activation dtype, an error of the order of the output's own rounding.
 */
import {
  add,
  type Device,
  type DType,
  type FloatDType,
  fusedAddRmsnorm,
  type Int4Weight,
  type Int8Weight,
  linear,
  linearInt4,
  linearInt8,
  linearSwiglu,
  QkValueError,
  rmsnorm,
  rmsnormLinear,
  swigluFused,
  Tensor,
} from '@qk/ops';
import { LINEAR_KEYS, type LinearKey, type QuantizedLayer, type QuantizedLinear } from '../quant/quantize.js';
import type { LayerWeights, WeightInfo } from '../types.js';

type T = Tensor<FloatDType>;

/** AWQ/GPTQ zero points on the device: `offsets` `[out, groups]` and the shared 0/1 `groupSums` `[groups, in]`. */
export interface ZeroPoints {
  readonly offsets: T;
  readonly groupSums: T;
}

/** A weight-only quantized projection as the layered engine keeps it. */
export type QuantProjection =
  | { readonly bits: 8; readonly weight: Int8Weight }
  | { readonly bits: 4; readonly weight: Int4Weight; readonly zeroPoints?: ZeroPoints };

/** A decoder projection: a float `[out, in]` weight, or a quantized one. {@link project} applies either. */
export type Projection = T | QuantProjection;

/** True for a quantized projection. */
export function isQuantized(p: Projection): p is QuantProjection {
  return !(p instanceof Tensor);
}

/**
 * `x · Wᵀ` for a float or quantized projection `w`: `x` `[..., in]` to `[..., out]` in `x`'s dtype, written to `out`
 * when given (the fixed buffers of a captured decode step).
 */
export function project(x: T, w: Projection, out?: T): T {
  const options = out === undefined ? {} : { out };
  if (!isQuantized(w)) return linear(x, w, options);
  if (w.bits === 8) return linearInt8(x, w.weight, options);
  if (w.zeroPoints === undefined) return linearInt4(x, w.weight, options);
  const codes = linearInt4(x, w.weight);
  const sums = linear(x, w.zeroPoints.groupSums);
  const shift = linear(sums, w.zeroPoints.offsets);
  try {
    return add(codes, shift, options);
  } finally {
    for (const t of [codes, sums, shift]) t.dispose();
  }
}

/** `silu(x · gateᵀ) · (x · upᵀ)` for the fused `[gate; up]` projection: `[..., in]` to `[..., ffn]`. */
export function projectSwiglu(x: T, gateUp: Projection, out?: T): T {
  const options = out === undefined ? {} : { out };
  if (!isQuantized(gateUp)) return linearSwiglu(x, gateUp, options);
  const both = project(x, gateUp);
  try {
    return swigluFused(both, options);
  } finally {
    both.dispose();
  }
}

/** Options of {@link normProject}: those of `rmsnormLinear`, plus the scratch row a quantized projection needs. */
export interface NormProjectOptions {
  readonly eps: number;
  /** Added to `x` before the norm. */
  readonly residual?: T;
  /** Receives `x + residual` (only with `residual`); must not share memory with `x`, `residual` or `out`. */
  readonly residualOut?: T;
  /** SwiGLU over a fused `[gate; up]` projection. */
  readonly glu?: boolean;
  readonly out: T;
  /**
   * Shape and dtype of `x`: receives the normalised input of a quantized projection (the float path normalises
   * inside the GEMV and leaves it untouched).
   */
  readonly normed: T;
}

/**
 * `project(rmsnorm(x [+ residual]), w)`, with SwiGLU when `glu`: one fused `rmsnormLinear` kernel for a float `w`,
 * add + RMSNorm into `normed` then the quantized projection for a quantized one (see the file header).
 */
export function normProject(x: T, normWeight: T, w: Projection, o: NormProjectOptions): T {
  const { eps, residual, residualOut, out, normed } = o;
  if (!isQuantized(w)) {
    return rmsnormLinear(x, normWeight, w, {
      eps,
      out,
      ...(residual === undefined ? {} : { residual }),
      ...(residualOut === undefined ? {} : { residualOut }),
      ...(o.glu ? { glu: 'swiglu' as const } : {}),
    });
  }
  if (residual === undefined) rmsnorm(x, normWeight, { eps, out: normed });
  else {
    const sum = fusedAddRmsnorm(x, residual, normWeight, {
      eps,
      out: normed,
      ...(residualOut === undefined ? {} : { residualOut }),
    });
    if (residualOut === undefined) sum.residual.dispose();
  }
  return o.glu ? projectSwiglu(normed, w, out) : project(normed, w, out);
}

/**
 * One decoder layer's projections as the engine keeps them: q|k|v and gate|up fused along rows (one GEMV each in a
 * decode step), with views of their parts (the unfused-RoPE prefill runs q, k and v apart, the eager MLP gate and up).
 */
export interface LayerProjections {
  readonly qkv: Projection;
  readonly q: Projection;
  readonly k: Projection;
  readonly v: Projection;
  readonly o: Projection;
  readonly gateUp: Projection;
  readonly gate: Projection;
  readonly up: Projection;
  readonly down: Projection;
}

/** Where and in which float dtype {@link buildLayerProjections} puts the weights, and the tensors layers share. */
export interface ProjectionTarget {
  readonly device: Device;
  /** The activations' dtype (zero-point offsets are converted to it). */
  readonly dtype: FloatDType;
  /** Group-indicator matrices by input width and group size, shared by every layer (see {@link project}). */
  readonly shared: Map<string, T>;
}

/** `parts` stacked along their first axis into one new tensor on `device`, and views of each part in it. */
function concatRows<D extends DType>(
  parts: readonly Tensor<D>[],
  device: Device,
): { fused: Tensor<D>; views: Tensor<D>[] } {
  const rows = parts.reduce((n, p) => n + p.shape[0]!, 0);
  const fused = Tensor.empty([rows, ...parts[0]!.shape.slice(1)], parts[0]!.dtype, device);
  let at = 0;
  const views = parts.map((p) => {
    const view = fused.slice(at, at + p.shape[0]!);
    view.copyFrom(p);
    at += p.shape[0]!;
    return view;
  });
  return { fused, views };
}

/** The 0/1 matrix `[in / g, in]` whose product with `x` gives the sum of each group of `g` inputs. */
function groupSums(inFeatures: number, g: number, target: ProjectionTarget): T {
  const key = `${inFeatures}/${g}/${target.dtype}`;
  const known = target.shared.get(key);
  if (known !== undefined) return known;
  const groups = inFeatures / g;
  const ones = new Float32Array(groups * inFeatures);
  for (let r = 0; r < groups; r++) ones.fill(1, r * inFeatures + r * g, r * inFeatures + (r + 1) * g);
  const f32 = Tensor.fromStorage(ones, [groups, inFeatures], 'f32');
  const typed = f32.to(target.dtype);
  f32.dispose();
  const placed = target.device === 'cpu' ? typed : typed.to(target.device);
  if (placed !== typed) typed.dispose();
  target.shared.set(key, placed);
  return placed;
}

/** The projections the engine stacks into one weight (one GEMV in a decode step). */
const FUSED_GROUPS: readonly (readonly LinearKey[])[] = [
  ['q', 'k', 'v'],
  ['gate', 'up'],
];

/** A quantized projection's format, as a phrase: projections stacked into one weight must share it. */
const formatOf = (p: QuantizedLinear) =>
  p.bits === 8 ? 'int8' : `int4 in groups of ${p.weight.groupSize}${p.offsets ? ' with zero points' : ''}`;

/**
 * Throws `QkValueError` when a layer's q, k and v (or gate and up) differ in format: the engine stacks each set into
 * one weight. Checked before anything is copied to the device.
 */
export function checkFusable(quantized: readonly QuantizedLayer[]): void {
  quantized.forEach((layer, i) => {
    for (const keys of FUSED_GROUPS) {
      const first = formatOf(layer[keys[0]!]);
      const other = keys.find((key) => formatOf(layer[key]) !== first);
      if (other !== undefined) {
        throw new QkValueError(
          'layeredEngine',
          `quantized[${i}].${other}`,
          `is ${formatOf(layer[other])} but ${keys[0]} is ${first}; the layered engine stacks ${keys.join(', ')} into one weight, so they must share one format.`,
        );
      }
    }
  });
}

/** Quantized projections of one format ({@link checkFusable}) stacked along their output rows on the target device, and views of each. */
function fuseQuantized(
  parts: readonly QuantizedLinear[],
  target: ProjectionTarget,
): { fused: QuantProjection; views: QuantProjection[] } {
  const first = parts[0]!;
  const codes = concatRows(
    parts.map((p) => p.weight.qweight as Tensor),
    target.device,
  );
  const scales = concatRows(
    parts.map((p) => p.weight.scales),
    target.device,
  );
  if (first.bits === 8) {
    const as8 = (qweight: Tensor, s: Tensor<'f32'>): QuantProjection => ({
      bits: 8,
      weight: { qweight: qweight as Tensor<'i8'>, scales: s },
    });
    return {
      fused: as8(codes.fused, scales.fused),
      views: codes.views.map((c, i) => as8(c, scales.views[i]!)),
    };
  }
  const groupSize = first.weight.groupSize;
  let offsets: { fused: T; views: T[] } | undefined;
  let sums: T | undefined;
  if (first.offsets !== undefined) {
    const converted = parts.map((p) => (p as { offsets: Tensor<'f32'> }).offsets.to(target.dtype));
    offsets = concatRows(converted, target.device);
    for (const t of converted) t.dispose();
    sums = groupSums(first.weight.qweight.shape[1]! * 2, groupSize, target);
  }
  const as4 = (qweight: Tensor, s: Tensor<'f32'>, off: T | undefined): QuantProjection => ({
    bits: 4,
    weight: { qweight: qweight as Tensor<'u8'>, scales: s, groupSize },
    ...(off === undefined ? {} : { zeroPoints: { offsets: off, groupSums: sums! } }),
  });
  return {
    fused: as4(codes.fused, scales.fused, offsets?.fused),
    views: codes.views.map((c, i) => as4(c, scales.views[i]!, offsets?.views[i])),
  };
}

/**
 * A decoder layer's projections on the target device: from the float weights of `w`, or, when `quantized` is given
 * (checked by {@link checkFusable}), from those (copied to the device as they are stored; the float projections of
 * `w`, when present, are freed). The float parts that were fused are freed; `o` and `down` are kept as they are.
 */
export function buildLayerProjections(
  w: Partial<LayerWeights>,
  quantized: QuantizedLayer | undefined,
  target: ProjectionTarget,
): LayerProjections {
  if (quantized === undefined) {
    const f = w as LayerWeights;
    const qkv = concatRows([f.q, f.k, f.v], target.device);
    const gateUp = concatRows([f.gate, f.up], target.device);
    for (const t of [f.q, f.k, f.v, f.gate, f.up]) t.dispose();
    const [q, k, v] = qkv.views as [T, T, T];
    const [gate, up] = gateUp.views as [T, T];
    return { qkv: qkv.fused, q, k, v, o: f.o, gateUp: gateUp.fused, gate, up, down: f.down };
  }
  for (const key of LINEAR_KEYS) w[key]?.dispose();
  const fuse = (keys: readonly LinearKey[]) =>
    fuseQuantized(
      keys.map((key) => quantized[key]),
      target,
    );
  const [qkv, gateUp] = FUSED_GROUPS.map(fuse) as [ReturnType<typeof fuse>, ReturnType<typeof fuse>];
  const [q, k, v] = qkv.views as [QuantProjection, QuantProjection, QuantProjection];
  const [gate, up] = gateUp.views as [QuantProjection, QuantProjection];
  return {
    qkv: qkv.fused,
    q,
    k,
    v,
    o: fuse(['o']).fused,
    gateUp: gateUp.fused,
    gate,
    up,
    down: fuse(['down']).fused,
  };
}

/** The tensors a projection holds (views and shared group-indicator matrices included). */
export function projectionTensors(p: Projection): Tensor[] {
  if (!isQuantized(p)) return [p];
  const tensors: Tensor[] = [p.weight.qweight, p.weight.scales];
  if (p.bits === 4 && p.zeroPoints !== undefined) tensors.push(p.zeroPoints.offsets, p.zeroPoints.groupSums);
  return tensors;
}

/**
 * What the layers' projections and the `others` (embedding, LM head, norms) hold: the projections' format and the
 * bytes of each group, every tensor counted once (fused weights, not their views; a tied LM head once; the shared
 * group-indicator matrices once).
 */
export function weightInfo(layers: readonly LayerProjections[], others: readonly Tensor[]): WeightInfo {
  const projections = new Set<Tensor>();
  for (const l of layers) {
    for (const p of [l.qkv, l.o, l.gateUp, l.down]) for (const t of projectionTensors(p)) projections.add(t);
  }
  const sum = (tensors: Iterable<Tensor>) => {
    let bytes = 0;
    for (const t of tensors) bytes += t.nbytes;
    return bytes;
  };
  const first = layers[0]?.qkv;
  const format = first === undefined || !isQuantized(first) ? 'bf16' : first.bits === 8 ? 'int8' : 'int4';
  return { format, projectionBytes: sum(projections), otherBytes: sum(new Set(others)) };
}
