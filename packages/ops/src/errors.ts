/**
 * Every error qk throws on purpose extends {@link QkError} and carries a stable `code`, so callers can
 * branch on `err.code` (or `instanceof`) instead of parsing messages. Messages are sentences a user can act on.
 */

/** Stable machine-readable error codes. */
export type QkErrorCode =
  | 'QK_SHAPE'
  | 'QK_DTYPE'
  | 'QK_VALUE'
  | 'QK_INDEX'
  | 'QK_DEVICE'
  | 'QK_DISPOSED'
  | 'QK_OOM'
  | 'QK_CUDA'
  | 'QK_ASSERTION'
  // Model-level codes, used by @qk/qwen3.
  | 'QK_CONFIG'
  | 'QK_CHECKPOINT'
  | 'QK_TOKENIZER'
  | 'QK_CONTEXT'
  | 'QK_ABORTED'
  | 'QK_BUSY';

/** Base class of every error thrown by qk. */
export class QkError extends Error {
  readonly code: QkErrorCode;
  /** The op or function that rejected its input, e.g. `'rmsnorm'`. */
  readonly op: string | undefined;

  constructor(code: QkErrorCode, message: string, op?: string) {
    super(op === undefined ? message : `${op}: ${message}`);
    this.name = new.target.name;
    this.code = code;
    this.op = op;
  }
}

/** Details that a shape or dtype error reports: which op, which argument, what was expected and what came. */
export interface ArgumentMismatch {
  op: string;
  arg: string;
  expected: string;
  got: string;
  /** Optional hint: why the expectation holds or what to do. */
  hint?: string;
}

function describeMismatch(d: ArgumentMismatch, what: string): string {
  const base = `argument "${d.arg}" has ${what} ${d.got}, expected ${d.expected}`;
  return d.hint === undefined ? `${base}.` : `${base} (${d.hint}).`;
}

/** A tensor has the wrong rank or extents for the op. */
export class QkShapeError extends QkError {
  readonly arg: string;
  readonly expected: string;
  readonly got: string;
  constructor(d: ArgumentMismatch) {
    super('QK_SHAPE', describeMismatch(d, 'shape'), d.op);
    this.arg = d.arg;
    this.expected = d.expected;
    this.got = d.got;
  }
}

/** A tensor has a dtype the op does not accept. */
export class QkDtypeError extends QkError {
  readonly arg: string;
  readonly expected: string;
  readonly got: string;
  constructor(d: ArgumentMismatch) {
    super('QK_DTYPE', describeMismatch(d, 'dtype'), d.op);
    this.arg = d.arg;
    this.expected = d.expected;
    this.got = d.got;
  }
}

/** An option or scalar argument is out of its valid range (negative temperature, top-p above 1, …). */
export class QkValueError extends QkError {
  readonly arg: string;
  constructor(op: string, arg: string, message: string) {
    super('QK_VALUE', `argument "${arg}" ${message}`, op);
    this.arg = arg;
  }
}

/** An index (token id, position) falls outside the range it addresses. */
export class QkIndexError extends QkError {
  readonly arg: string;
  readonly index: number;
  readonly limit: number;
  constructor(op: string, arg: string, index: number, limit: number, what: string) {
    super('QK_INDEX', `argument "${arg}" holds ${index}, outside [0, ${limit}) ${what}.`, op);
    this.arg = arg;
    this.index = index;
    this.limit = limit;
  }
}

/** The requested device is unavailable or the tensor lives on a device the operation cannot use. */
export class QkDeviceError extends QkError {
  constructor(message: string, op?: string) {
    super('QK_DEVICE', message, op);
  }
}

/** The GPU ran out of memory even after the caching allocator released its cache. The process keeps working. */
export class QkOutOfMemoryError extends QkError {
  readonly requestedBytes: number;
  readonly freeBytes: number;
  readonly totalBytes: number;
  constructor(op: string, requestedBytes: number, freeBytes: number, totalBytes: number) {
    const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
    super(
      'QK_OOM',
      `out of GPU memory: requested ${mib(requestedBytes)} with ${mib(freeBytes)} free of ${mib(totalBytes)}; dispose tensors you no longer need, use a smaller model, context or batch, or free the GPU from other processes.`,
      op,
    );
    this.requestedBytes = requestedBytes;
    this.freeBytes = freeBytes;
    this.totalBytes = totalBytes;
  }
}

/** A CUDA call failed (an illegal address, a launch failure, …); `cudaError` is CUDA's error name. */
export class QkCudaError extends QkError {
  readonly cudaError: string;
  constructor(op: string, cudaError: string, detail: string) {
    super('QK_CUDA', `${detail.replace(new RegExp(`^${op}: `), '')}.`, op);
    this.cudaError = cudaError;
  }
}

/** A tensor was used after `dispose()`. */
export class QkDisposedError extends QkError {
  constructor(op: string) {
    super(
      'QK_DISPOSED',
      'the tensor was disposed; create a new one or keep it alive until you are done.',
      op,
    );
  }
}

/** Thrown by `@qk/ops/testing` when two tensors are not close enough. */
export class QkAssertionError extends QkError {
  constructor(message: string) {
    super('QK_ASSERTION', message);
  }
}
