/**
 * What the GPU engines do once a step's logits turn out non-finite (issue #51: never a silent token 0). The check
 * itself costs nothing per step: the argmax and sampling kernels already read every logit of the row, and refuse a
 * row holding NaN or +∞ (or one entirely −∞) by writing id −1 in place of the token, which the engine reads back
 * anyway; the megakernel fails its launch with its `nonFinite` code instead. Only then, on the error path, are the
 * weights scanned, to name those that hold non-finite values (the cpu engine's sentence, {@link QkNonFiniteError}).
 */
import { findNonFinite, isFloatDType, QkValueError, type Tensor } from '@qk/ops';
import { QkNonFiniteError } from '../errors.js';

/** Weights named in a {@link QkNonFiniteError}, at most (the cpu engine's limit too). */
const MAX_NAMED = 5;

/** Whether `t` (a float tensor on any device) holds NaN or ±Inf: on the GPU one device pass, on the CPU a loop. */
export function holdsNonFinite(t: Tensor): boolean {
  if (!isFloatDType(t.dtype) || t.size === 0) return false;
  return findNonFinite(t).count > 0;
}

/**
 * The error for non-finite logits at generation step `step`, naming the first weights of `named` (in order) that
 * hold non-finite values. Scans until it has named {@link MAX_NAMED}, or through all of them (the error path only:
 * one pass over the weights, on the device for the GPU engines).
 */
export function nonFiniteError(step: number, named: Iterable<readonly [string, Tensor]>): QkNonFiniteError {
  const names: string[] = [];
  const seen = new Set<Tensor>();
  for (const [name, t] of named) {
    if (names.length >= MAX_NAMED) break;
    if (seen.has(t)) continue; // a tied LM head is the embedding
    seen.add(t);
    if (holdsNonFinite(t)) names.push(name);
  }
  return new QkNonFiniteError(step, names);
}

/**
 * Whether `e` is @qk/ops refusing a row of non-finite logits: `sample` (CUDA ids read back) and the megakernel's
 * `nonFinite` failure throw `QkValueError` on the argument "logits".
 */
export function isNonFiniteLogitsError(e: unknown): boolean {
  return e instanceof QkValueError && e.arg === 'logits';
}
