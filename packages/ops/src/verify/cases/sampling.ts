/** Verify cases of the sampling family. */
import type { VerifyCase } from '../types.js';

export const SAMPLING_CASES: VerifyCase[] = [];
