/**
 * Errors of `@qk/qwen3`. Each extends `QkError` from `@qk/ops` with a stable `code`, and its message says what
 * was wrong and what to do about it.
 */
import { QkError } from '@qk/ops';

/** A `config.json` (or preset request) that we cannot run: another architecture, MoE, rope scaling, bad values. */
export class QkConfigError extends QkError {
  constructor(message: string) {
    super('QK_CONFIG', message, 'config');
  }
}

/** A checkpoint that is missing, truncated, corrupted, or does not match its config. `file` names the culprit. */
export class QkCheckpointError extends QkError {
  readonly file: string | undefined;
  constructor(message: string, file?: string) {
    super('QK_CHECKPOINT', file === undefined ? message : `${file}: ${message}`, 'checkpoint');
    this.file = file;
  }
}

/** Tokenizer files that cannot be read or a chat template that fails to render. */
export class QkTokenizerError extends QkError {
  constructor(message: string) {
    super('QK_TOKENIZER', message, 'tokenizer');
  }
}

/** A prompt (plus the tokens asked for) that does not fit in the model's context, or an empty prompt. */
export class QkContextError extends QkError {
  constructor(message: string) {
    super('QK_CONTEXT', message, 'generate');
  }
}

/** Work stopped because its `AbortSignal` fired. `reason` is the signal's reason. */
export class QkAbortError extends QkError {
  readonly reason: unknown;
  constructor(what: string, reason?: unknown) {
    super('QK_ABORTED', `${what} was aborted${reason instanceof Error ? `: ${reason.message}` : ''}.`, what);
    this.reason = reason;
  }
}

/** The model is disposed, or busy in a way the caller asked not to wait for. */
export class QkBusyError extends QkError {
  constructor(message: string) {
    super('QK_BUSY', message, 'model');
  }
}

/**
 * Untrusted input over one of qk's budgets (`LIMITS`): a JSON file nested too deep or too big, too many tensors, a
 * config value out of range, a chat template that runs too long, a tokenizer regex that could backtrack without
 * bound. `file`, `key` and `limit` name what was exceeded. Its code is `QK_VALUE` (a value out of range).
 */
export class QkLimitError extends QkError {
  readonly file: string;
  readonly key: string;
  readonly limit: string;
  constructor(file: string, key: string, limit: string, what: string) {
    super('QK_VALUE', `${file}: ${key} ${what}, over qk's limit of ${limit}.`, 'input');
    this.file = file;
    this.key = key;
    this.limit = limit;
  }
}

/**
 * The model produced NaN or ±Inf logits. `step` is the generated token's index (0: the prompt's forward pass);
 * `tensors` names the weights that hold non-finite values (empty when all are finite: the activations overflowed).
 */
export class QkNonFiniteError extends QkError {
  readonly step: number;
  readonly tensors: readonly string[];
  constructor(step: number, tensors: readonly string[]) {
    super(
      'QK_VALUE',
      `the model produced NaN/Inf at step ${step}; ${
        tensors.length > 0
          ? `the weights hold non-finite values in ${tensors.join(', ')}: the checkpoint is corrupted, re-download or re-save it`
          : 'the weights are all finite, so the activations overflowed: try float32 weights (dtype "f32")'
      }.`,
      'generate',
    );
    this.step = step;
    this.tensors = tensors;
  }
}

/**
 * A model that cannot fit in the memory its engine would use, refused before anything is allocated. The message
 * says how much is needed, how much there is, and what to do.
 */
export class QkMemoryError extends QkError {
  readonly neededBytes: number;
  readonly freeBytes: number;
  readonly totalBytes: number;
  constructor(op: string, message: string, neededBytes: number, freeBytes: number, totalBytes: number) {
    super('QK_OOM', message, op);
    this.neededBytes = neededBytes;
    this.freeBytes = freeBytes;
    this.totalBytes = totalBytes;
  }
}
