/** Small random Qwen3 configs and weights for engine and generation tests (no checkpoint, no loader). */
import { type FloatDType, Tensor } from '@qk/ops';
import type { LayerWeights, Qwen3Config, Qwen3Weights } from '../../src/types.js';

/** A small GQA config: vocab 300, hidden 64, 2 layers, 4 query / 2 KV heads of 16. */
export function smallConfig(overrides: Partial<Qwen3Config> = {}): Qwen3Config {
  return {
    hiddenSize: 64,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
    intermediateSize: 96,
    vocabSize: 300,
    // A small theta turns the rotation fast enough to matter over a dozen positions.
    ropeTheta: 10_000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: false,
    maxPositionEmbeddings: 512,
    torchDtype: 'f32',
    eosTokenIds: [299],
    ...overrides,
  };
}

/**
 * The smallest shape the megakernel serves: head size 128, 4 query heads in groups of 2, hidden 256, FFN 384, an
 * untied LM head over 1,000 ids (widths that INT4 groups of up to 64, and of 32 with zero points, cut into pairs).
 */
export const MEGAKERNEL_SMALL: Qwen3Config = smallConfig({
  hiddenSize: 256,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 128,
  intermediateSize: 384,
  vocabSize: 1000,
});

/**
 * Random weights for `config`: projections ~ N(0, 0.08²)-ish scaled by fan-in, norms around 1 (never exactly 1,
 * so a norm applied with the wrong weight shows up), an embedding of unit scale.
 */
export function randomWeights<D extends FloatDType = 'f32'>(
  config: Qwen3Config,
  seed: number,
  dtype?: D,
): Qwen3Weights<D> {
  let s = seed * 1000;
  const d = (dtype ?? 'f32') as D;
  const proj = (out: number, inp: number) =>
    Tensor.randn([out, inp], { dtype: d, seed: s++, std: 1 / Math.sqrt(inp) });
  const norm = (n: number) => Tensor.randn([n], { dtype: d, seed: s++, mean: 1, std: 0.2 });
  const { hiddenSize: h, numHeads, numKvHeads, headDim, intermediateSize: ffn, vocabSize } = config;
  const embed = Tensor.randn([vocabSize, h], { dtype: d, seed: s++ });
  const layers: LayerWeights<D>[] = Array.from({ length: config.numLayers }, () => ({
    inputNorm: norm(h),
    q: proj(numHeads * headDim, h),
    k: proj(numKvHeads * headDim, h),
    v: proj(numKvHeads * headDim, h),
    qNorm: norm(headDim),
    kNorm: norm(headDim),
    o: proj(h, numHeads * headDim),
    postNorm: norm(h),
    gate: proj(ffn, h),
    up: proj(ffn, h),
    down: proj(h, ffn),
  }));
  return {
    embed,
    layers,
    norm: norm(h),
    lmHead: config.tieWordEmbeddings ? embed : proj(vocabSize, h),
  };
}

/** Uniform random token ids in `[0, vocab)` from a seeded stream. */
export function randomIds(n: number, vocab: number, seed: number): number[] {
  const u = Tensor.rand([n], { seed }).toArray();
  return u.map((x) => Math.floor(x * vocab));
}
