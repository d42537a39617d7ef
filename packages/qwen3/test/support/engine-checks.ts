/**
 * Helpers the GPU engine tests share: weights moved to the device, a logits trace, closeness of two arrays and their
 * argmax.
 */
import { type FloatDType, Tensor } from '@qk/ops';
import { closeness } from '@qk/ops/testing';
import type { Engine, Qwen3Weights } from '../../src/types.js';

/** The same weights on the GPU (a tensor shared by two fields, as a tied LM head, stays shared). */
export function toCuda<D extends FloatDType>(w: Qwen3Weights<D>): Qwen3Weights<D> {
  const moved = new Map<Tensor, Tensor>();
  const mv = (t: Tensor<D>) => {
    let m = moved.get(t);
    if (m === undefined) moved.set(t, (m = t.to('cuda')));
    return m as Tensor<D>;
  };
  return {
    embed: mv(w.embed),
    layers: w.layers.map((l) => Object.fromEntries(Object.entries(l).map(([k, t]) => [k, mv(t)]))) as never,
    norm: mv(w.norm),
    lmHead: mv(w.lmHead),
  };
}

/** Logits of a prefill of `ids[0..split)` then one decode step per remaining id, per step. */
export function logitTrace(engine: Engine, ids: readonly number[], split: number): Float32Array[] {
  const out = [engine.logits(ids.slice(0, split), 0)];
  for (let p = split; p < ids.length; p++) out.push(engine.logits([ids[p]!], p));
  return out;
}

/** `closeness` of two float32 arrays (`got` against `want`). */
export function closenessOf(got: Float32Array, want: Float32Array) {
  return closeness(
    Tensor.fromStorage(got, [got.length], 'f32'),
    Tensor.fromStorage(want, [want.length], 'f32'),
  );
}

/** Index of the largest value (the first of equal ones). */
export function argmaxOf(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}
