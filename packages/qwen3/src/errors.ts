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
