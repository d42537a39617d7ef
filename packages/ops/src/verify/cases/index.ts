/** Every verify case, by op family. Each family's file owns its cases. */
import type { VerifyCase } from '../types.js';
import { ATTENTION_CASES } from './attention.js';
import { ELEMENTWISE_CASES } from './elementwise.js';
import { FINITE_CASES } from './finite.js';
import { FUSED_LINEAR_CASES } from './fused-linear.js';
import { KV_APPEND_CASES } from './kv-append.js';
import { LINEAR_CASES } from './linear.js';
import { LOGIT_CONTROLS_CASES } from './logit-controls.js';
import { NORM_CASES } from './norm.js';
import { SAMPLING_CASES } from './sampling.js';

export const ALL_CASES: readonly VerifyCase[] = [
  ...NORM_CASES,
  ...ELEMENTWISE_CASES,
  ...FINITE_CASES,
  ...KV_APPEND_CASES,
  ...LINEAR_CASES,
  ...FUSED_LINEAR_CASES,
  ...ATTENTION_CASES,
  ...SAMPLING_CASES,
  ...LOGIT_CONTROLS_CASES,
];
