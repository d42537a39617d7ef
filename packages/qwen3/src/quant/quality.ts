/**
 * How much quantization changes a model: per-projection output error against the float weights, and the logit KL
 * divergence and top-1 agreement of a quantized engine against a float one over teacher-forced steps.
 */
import { linear, QkValueError, Tensor } from '@qk/ops';
import type { Engine, Qwen3Weights } from '../types.js';
import { LINEAR_KEYS, type LinearKey, linearName, type QuantizedLayer, quantLinear } from './quantize.js';

/** Relative output error of one quantized projection. */
export interface LinearError {
  readonly tensor: string;
  readonly layer: number;
  readonly key: LinearKey;
  /** `‖y_q − y‖ / ‖y‖` over the probe rows. */
  readonly relError: number;
}

/** A small deterministic PRNG (mulberry32) and a standard normal draw from it. */
function normals(seed: number, count: number): Float32Array {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    const u = Math.max(uniform(), 1e-12);
    out[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  }
  return out;
}

/**
 * Runs every quantized projection and its float original on the same `rows` random normal input rows (float32, on
 * the weights' device) and returns `‖y_q − y‖ / ‖y‖` per projection.
 */
export function linearErrors(
  weights: Qwen3Weights,
  quantized: readonly QuantizedLayer[],
  options: { rows?: number; seed?: number } = {},
): LinearError[] {
  const { rows = 8, seed = 1 } = options;
  const out: LinearError[] = [];
  weights.layers.forEach((layer, i) => {
    for (const key of LINEAR_KEYS) {
      const w = layer[key];
      const n = w.shape[1]!;
      const host = Tensor.fromStorage(
        normals(seed + i * 31 + LINEAR_KEYS.indexOf(key), rows * n),
        [rows, n],
        'f32',
      );
      const x = w.device === 'cpu' ? host : host.to(w.device);
      if (x !== host) host.dispose();
      const wf = w.dtype === 'f32' ? w : w.to('f32');
      const ref = linear(x, wf as Tensor<'f32'>);
      const got = quantLinear(x, quantized[i]![key]);
      let num = 0;
      let den = 0;
      // (read on the host: the weights may be on the GPU)
      const refHost = ref.device === 'cpu' ? ref : ref.to('cpu');
      const gotHost = got.device === 'cpu' ? got : got.to('cpu');
      const r = refHost.data;
      const g = gotHost.data;
      for (let j = 0; j < r.length; j++) {
        num += (g[j]! - r[j]!) ** 2;
        den += r[j]! ** 2;
      }
      out.push({
        tensor: linearName(i, key),
        layer: i,
        key,
        relError: Math.sqrt(num / Math.max(den, 1e-300)),
      });
      for (const t of new Set([x, ref, got, refHost, gotHost])) t.dispose();
      if (wf !== w) wf.dispose();
    }
  });
  return out;
}

/** Agreement of a candidate engine's logits with a reference engine's over teacher-forced steps. */
export interface LogitAgreement {
  readonly steps: number;
  /** Mean over steps of `KL(softmax(ref) ‖ softmax(candidate))`, in nats. */
  readonly klMean: number;
  readonly klMax: number;
  /** Share of steps whose argmax is the same token, in [0, 1]. */
  readonly top1: number;
}

function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  const out = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) out[i] = logits[i]! - lse;
  return out;
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/**
 * Feeds `ids` one token per step (teacher forcing: both engines see the same tokens, whatever they would pick) to
 * fresh-cache engines from position 0 and compares the logits after each token.
 */
export function compareLogits(reference: Engine, candidate: Engine, ids: readonly number[]): LogitAgreement {
  if (ids.length === 0) throw new QkValueError('compareLogits', 'ids', 'must hold at least one token.');
  let klSum = 0;
  let klMax = 0;
  let same = 0;
  ids.forEach((id, t) => {
    const a = reference.logits([id], t);
    const b = candidate.logits([id], t);
    const la = logSoftmax(a);
    const lb = logSoftmax(b);
    let kl = 0;
    for (let i = 0; i < la.length; i++) kl += Math.exp(la[i]!) * (la[i]! - lb[i]!);
    kl = Math.max(0, kl);
    klSum += kl;
    klMax = Math.max(klMax, kl);
    if (argmax(a) === argmax(b)) same++;
  });
  return { steps: ids.length, klMean: klSum / ids.length, klMax, top1: same / ids.length };
}
