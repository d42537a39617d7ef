/** Verify cases of the linear family. */
import type { VerifyCase } from '../types.js';

export const LINEAR_CASES: VerifyCase[] = [];
