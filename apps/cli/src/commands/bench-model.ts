/** A @qk/qwen3 model as the end-to-end bench suites see it (@qk/bench does not depend on the model package). */
import type { E2eModel } from '@qk/bench';
import type { GenerateOptions, Qwen3Config, Qwen3Model } from '@qk/qwen3';

/**
 * Bytes one decode step must read: every weight once (one embedding row), and the KV cache up to `position`. With
 * `lmScreen` (megakernel steps that screen the LM head), the LM head counts as its int8 screen: one byte per weight
 * and 16 per row (the bf16 rows recomputed per step are left out).
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

/** How `sampling` draws on `model`, its defaults filled in: "temperature 0.6, top-k 20, top-p 0.95, seed 0". */
export function samplingLabel(model: Qwen3Model, sampling: GenerateOptions): string {
  const d = model.samplingDefaults;
  const t = sampling.temperature ?? d.temperature;
  if (t === 0) return 'greedy';
  return `temperature ${t}, top-k ${sampling.topK ?? d.topK}, top-p ${sampling.topP ?? d.topP}, seed ${sampling.seed ?? 0}`;
}

/**
 * Wraps a loaded model; generation with stats only: greedy, or drawing by `sampling` (generate's options over the
 * model's defaults).
 */
export function benchModel(model: Qwen3Model, sampling?: GenerateOptions): E2eModel {
  const elementBytes = model.engine === 'cpu' ? 4 : 2;
  const draw: GenerateOptions = sampling ?? { temperature: 0 };
  const label = samplingLabel(model, draw);
  const greedy = label === 'greedy';
  const screened = model.lmScreenFor(draw);
  return {
    engine: model.engine,
    source: model.source,
    vocabSize: model.tokenizer.vocabSize,
    bytesPerToken: (position) => bytesPerToken(model.config, position, elementBytes, screened),
    ...(greedy ? {} : { sampling: label }),
    ...(screened
      ? {
          note:
            `${model.engine}: ${greedy ? 'greedy' : 'sampled'} steps screen the LM head in int8 ` +
            `(the same tokens; bf16 recomputation of the rows that can hold the ${greedy ? 'argmax' : 'top-k'}), ` +
            'so its bytes count as the int8 screen: 1 byte per weight + 16 per row',
        }
      : {}),
    // Every run is measured cold: a prompt repeated across runs must not reuse the previous run's cached rows.
    generate: async (ids, maxTokens) => {
      model.forgetPrefix();
      return (await model.generate(ids, { ...draw, maxTokens }).result).stats;
    },
    ...(model.engine === 'layered'
      ? { patch: (spec: Record<string, string>) => model.patch(spec as Parameters<Qwen3Model['patch']>[0]) }
      : {}),
    dispose: () => model.dispose(),
  };
}
