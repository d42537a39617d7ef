/** Verify cases of the attention family. */
import type { VerifyCase } from '../types.js';

export const ATTENTION_CASES: VerifyCase[] = [];
