/**
 * Quantized projections of the seeded random models of random-model.ts, as the GPU tests of quantized engines take
 * them (the same values on every call).
 */
import { Tensor } from '@qk/ops';
import { LINEAR_KEYS, type QuantizedLayer, quantizeLinears } from '../../src/quant/quantize.js';
import type { Qwen3Config } from '../../src/types.js';
import { randomWeights } from './random-model.js';

/** INT8 per channel, or INT4 in groups, with or without zero points (AWQ/GPTQ offsets). */
export type QuantFormat = { bits: 8 } | { bits: 4; groupSize: number; zeroPoints?: boolean };

/**
 * The quantized projections of the random model `seed` (the same values on every call). Zero points: a random
 * offset per row and group, as AWQ/GPTQ repacking leaves them.
 */
export function quantized(c: Qwen3Config, seed: number, f: QuantFormat): QuantizedLayer[] {
  const layers = quantizeLinears(randomWeights(c, seed), f);
  if (f.bits === 8 || !f.zeroPoints) return layers;
  return layers.map(
    (layer, i) =>
      Object.fromEntries(
        LINEAR_KEYS.map((key, j) => {
          const q = layer[key];
          const [out, half] = q.weight.qweight.shape as [number, number];
          const offsets = Tensor.randn([out, (2 * half) / f.groupSize], {
            seed: seed * 97 + i * 7 + j,
            std: 0.02,
          });
          return [key, { ...q, offsets }];
        }),
      ) as QuantizedLayer,
  );
}
