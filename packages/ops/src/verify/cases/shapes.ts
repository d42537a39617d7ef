/**
 * Layer shapes of the Qwen3 models the sweep covers (published configs), and the odd sizes every kernel must
 * survive (not multiples of the 16-byte vector, not powers of two).
 */
import type { FloatDType } from '../../dtype.js';

export interface QwenShape {
  tag: 'qwen3-0.6b' | 'qwen3-8b';
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  vocab: number;
}

export const QWEN3_SHAPES: readonly QwenShape[] = [
  { tag: 'qwen3-0.6b', hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, ffn: 3072, vocab: 151936 },
  { tag: 'qwen3-8b', hidden: 4096, heads: 32, kvHeads: 8, headDim: 128, ffn: 12288, vocab: 151936 },
];

/** Row widths that are odd or not a whole number of 16-byte vectors. */
export const ODD_WIDTHS = [1, 7, 111, 989, 4097] as const;

export const VERIFY_DTYPES: readonly FloatDType[] = ['bf16', 'f16', 'f32'];

export function dims(...extents: number[]): string {
  return `[${extents.join('×')}]`;
}

/**
 * A xorshift32 stream of u32 values from `state` (0 becomes 1): cheap raw bits for inputs too large to draw as
 * normal deviates on the CPU (the benchmark-sized cases).
 */
export function xorshift32(state: number): () => number {
  let x = state >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}
