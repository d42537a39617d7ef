/** A @qk/qwen3 model as the end-to-end bench suites see it (@qk/bench does not depend on the model package). */
import type { E2eModel } from '@qk/bench';
import type { Qwen3Config, Qwen3Model } from '@qk/qwen3';

/**
 * Bytes one decode step must read: every weight once (one embedding row), and the KV cache up to `position`. With
 * `lmScreen` (greedy megakernel steps that screen the LM head), the LM head counts as its int8 screen: one byte per
 * weight and 16 per row (the few bf16 rows recomputed per step are left out).
 */
export function bytesPerToken(
  c: Qwen3Config,
  position: number,
  bytesPerElement = 2,
  lmScreen = false,
): number {
  const perLayer =
    c.hiddenSize * (c.numHeads + 2 * c.numKvHeads) * c.headDim +
    c.numHeads * c.headDim * c.hiddenSize +
    3 * c.hiddenSize * c.intermediateSize +
    2 * c.hiddenSize +
    2 * c.headDim;
  const lmHead = c.vocabSize * c.hiddenSize;
  const weights = c.numLayers * perLayer + c.hiddenSize + c.hiddenSize + (lmScreen ? 0 : lmHead);
  const kv = 2 * c.numLayers * c.numKvHeads * c.headDim * position;
  return (weights + kv) * bytesPerElement + (lmScreen ? c.vocabSize * (c.hiddenSize + 16) : 0);
}

/** Wraps a loaded model; greedy generation, stats only. */
export function benchModel(model: Qwen3Model): E2eModel {
  const elementBytes = model.engine === 'cpu' ? 4 : 2;
  return {
    engine: model.engine,
    source: model.source,
    vocabSize: model.tokenizer.vocabSize,
    bytesPerToken: (position) => bytesPerToken(model.config, position, elementBytes, model.lmScreen),
    ...(model.lmScreen
      ? {
          note:
            `${model.engine}: greedy steps screen the LM head in int8 (the same tokens; bf16 recomputation of the ` +
            'rows that can hold the argmax), so its bytes count as the int8 screen: 1 byte per weight + 16 per row',
        }
      : {}),
    generate: async (ids, maxTokens) =>
      (await model.generate(ids, { maxTokens, temperature: 0 }).result).stats,
    ...(model.engine === 'layered'
      ? { patch: (spec: Record<string, string>) => model.patch(spec as Parameters<Qwen3Model['patch']>[0]) }
      : {}),
    dispose: () => model.dispose(),
  };
}
