/**
 * `@qk/ops/verify`: every CUDA kernel against its `@qk/ops` reference over a sweep of shapes (odd sizes and the
 * Qwen3-0.6B / Qwen3-8B layer shapes) and dtypes, with fresh random inputs each run and poisoned outputs.
 */

export { ALL_CASES } from './cases/index.js';
export { formatVerifyRow, VERIFY_HEADER } from './format.js';
export { runVerify, type VerifyOptions, type VerifyReport } from './run.js';
export type { CaseInstance, VerifyCase, VerifyRow } from './types.js';
