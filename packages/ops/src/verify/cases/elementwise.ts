/** Verify cases of the elementwise family. */
import type { VerifyCase } from '../types.js';

export const ELEMENTWISE_CASES: VerifyCase[] = [];
