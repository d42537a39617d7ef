/** The bytes a decode step reads, as the decode bench counts them (the GB/s and % of ceiling columns). */
import { PRESETS } from '@qk/qwen3';
import { describe, expect, it } from 'vitest';
import { bytesPerToken } from '../src/commands/bench-model.js';

describe('bytesPerToken', () => {
  // Qwen3-0.6B: 28 layers of 15,730,944 weights (q/k/v 4,194,304, o 2,097,152, gate/up/down 9,437,184, norms 2,304),
  // the final norm, one embedding row, and the tied LM head of 151,936 × 1,024.
  const c = PRESETS['0.6b'];
  const layers = 28 * 15_730_944;
  const lmHead = 151_936 * 1024;

  it('counts every bf16 weight once, one embedding row, and the KV cache up to the position', () => {
    expect(bytesPerToken(c, 0)).toBe((layers + 1024 + 1024 + lmHead) * 2);
    expect(bytesPerToken(c, 100) - bytesPerToken(c, 0)).toBe(2 * 28 * 8 * 128 * 100 * 2);
  });

  it('counts a screened LM head as its int8 screen: one byte per weight and 16 per row', () => {
    expect(bytesPerToken(c, 0, 2, true)).toBe((layers + 1024 + 1024) * 2 + 151_936 * (1024 + 16));
    expect(bytesPerToken(c, 0, 2, false) - bytesPerToken(c, 0, 2, true)).toBe(153_151_488);
  });
});
