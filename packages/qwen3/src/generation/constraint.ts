/**
 * The contract between a generation and whatever restricts its next token (a JSON schema, a grammar, a tool
 * call's arguments). The generation asks for a mask before each step, applies it in the sampling path of the
 * engine that runs the step (on the GPU for the GPU engines), and reports the chosen token back.
 */

/**
 * A stateful restriction on the tokens a generation may produce. One instance serves one generation.
 *
 * Masks are bitsets over the model's vocabulary (the embedding rows, not only the tokenizer's ids): token `t` is
 * allowed when bit `t & 31` of word `t >>> 5` is set. Words past the vocabulary are ignored.
 */
export interface TokenConstraint {
  /**
   * The tokens allowed at the next step, or `null` when any token may follow. The returned array may be reused
   * by the constraint between calls: the caller copies or uploads it before calling {@link accept}. A mask with
   * no bit set is a constraint error: the generation ends with a `QkValueError` naming the constraint.
   */
  nextMask(): Uint32Array | null;
  /** Advances past `token`, which the caller drew from the last mask. Throws when the token was not allowed. */
  accept(token: number): void;
  /** True once the constrained text is complete: the generation ends (finish reason `stop`) before the next step. */
  isComplete(): boolean;
}

/** Words in a mask over `vocab` tokens. */
export function maskWords(vocab: number): number {
  return Math.ceil(vocab / 32);
}

/** Whether `token` is allowed by `mask` (a `null` mask allows every token). */
export function maskAllows(mask: Uint32Array | null, token: number): boolean {
  if (mask === null) return true;
  const word = mask[token >>> 5];
  return word !== undefined && ((word >>> (token & 31)) & 1) === 1;
}
