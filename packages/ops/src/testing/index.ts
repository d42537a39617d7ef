/**
 * `@qk/ops/testing`: compare a kernel's output with a reference the way qk's own tests do.
 *
 * ```ts
 * import { assertClose } from '@qk/ops/testing';
 * assertClose(myRmsnorm(x, w), rmsnorm(x, w), { op: 'rmsnorm', dtype: 'bf16' });
 * ```
 */

export { QkAssertionError } from '../errors.js';
export { assertClose, type Closeness, type CloseOptions, closeness } from './assert-close.js';
export { TOLERANCES, type Tolerance, type ToleranceOp, toleranceFor } from './tolerances.js';
