/**
 * `@qk/ops/testing`: compare a kernel's output with a reference the way qk's own tests do.
 *
 * ```ts
 * import { assertClose } from '@qk/ops/testing';
 * assertClose(myRmsnorm(x, w), rmsnorm(x, w), { op: 'rmsnorm', dtype: 'bf16' });
 * ```
 */
export { type Closeness, type CloseOptions, assertClose, closeness } from './assert-close.js';
export { type Tolerance, type ToleranceOp, TOLERANCES, toleranceFor } from './tolerances.js';
export { QkAssertionError } from '../errors.js';
