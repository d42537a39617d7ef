/** A @qk/qwen3 model as the end-to-end bench suites see it (@qk/bench does not depend on the model package). */
import type { E2eModel, StructuredModel } from '@qk/bench';
import type { GenerateOptions, Qwen3Config, Qwen3Model } from '@qk/qwen3';

/**
 * Bytes one decode step must read: every weight once (one embedding row), and the KV cache up to `position`. With
 * `lmScreen` (megakernel steps that screen the LM head), the LM head counts as its int8 screen: one byte per weight
 * and 16 per row (the bf16 rows recomputed per step are left out). `projectionBytes`, when given, replaces the
 * decoder projections' share (q/k/v/o/gate/up/down at `bytesPerElement`): a quantized model's bytes as the engine
 * holds them (codes, scales, zero-point offsets).
 */
export function bytesPerToken(
  c: Qwen3Config,
  position: number,
  bytesPerElement = 2,
  lmScreen = false,
  projectionBytes?: number,
): number {
  const projections =
    c.numLayers *
    (c.hiddenSize * (c.numHeads + 2 * c.numKvHeads) * c.headDim +
      c.numHeads * c.headDim * c.hiddenSize +
      3 * c.hiddenSize * c.intermediateSize);
  const norms = c.numLayers * (2 * c.hiddenSize + 2 * c.headDim) + c.hiddenSize;
  const lmHead = c.vocabSize * c.hiddenSize;
  const floats = norms + c.hiddenSize + (lmScreen ? 0 : lmHead);
  const kv = 2 * c.numLayers * c.numKvHeads * c.headDim * position;
  return (
    (floats + kv) * bytesPerElement +
    (projectionBytes ?? projections * bytesPerElement) +
    (lmScreen ? c.vocabSize * (c.hiddenSize + 16) : 0)
  );
}

/**
 * How `sampling` draws on `model`, its defaults filled in: "temperature 0.6, top-k 20, top-p 0.95, seed 0", then
 * the sampling controls that are on ("greedy, presence penalty 1.5").
 */
export function samplingLabel(model: Qwen3Model, sampling: GenerateOptions): string {
  const d = model.samplingDefaults;
  const t = sampling.temperature ?? d.temperature;
  const controls = [
    sampling.minP ? `min-p ${sampling.minP}` : '',
    sampling.presencePenalty ? `presence penalty ${sampling.presencePenalty}` : '',
    sampling.frequencyPenalty ? `frequency penalty ${sampling.frequencyPenalty}` : '',
    sampling.repetitionPenalty !== undefined && sampling.repetitionPenalty !== 1
      ? `repetition penalty ${sampling.repetitionPenalty}`
      : '',
    sampling.logitBias !== undefined ? 'logit bias' : '',
  ].filter(Boolean);
  const draw =
    t === 0
      ? 'greedy'
      : `temperature ${t}, top-k ${sampling.topK ?? d.topK}, top-p ${sampling.topP ?? d.topP}, seed ${sampling.seed ?? 0}`;
  return [draw, ...controls].join(', ');
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
  // A quantized model is its own series (layered-int8 beside a bf16 run's layered), its projections counted as held.
  const info = model.weightInfo;
  const quantized = info !== undefined && info.format !== 'bf16' ? info : undefined;
  const engine = quantized === undefined ? model.engine : `${model.engine}-${quantized.format}`;
  return {
    engine,
    source: model.source,
    vocabSize: model.tokenizer.vocabSize,
    bytesPerToken: (position) =>
      bytesPerToken(model.config, position, elementBytes, screened, quantized?.projectionBytes),
    ...(greedy ? {} : { sampling: label }),
    ...(screened
      ? {
          note:
            `${model.engine}: ${greedy ? 'greedy' : 'sampled'} steps screen the LM head in int8 ` +
            `(the same tokens; bf16 recomputation of the rows that can hold the ${greedy ? 'argmax' : 'top-k'}), ` +
            'so its bytes count as the int8 screen: 1 byte per weight + 16 per row',
        }
      : {}),
    ...(quantized === undefined
      ? {}
      : {
          note:
            `${engine}: the decoder projections are ${quantized.format} (${(quantized.projectionBytes / 2 ** 20).toFixed(0)} MiB ` +
            'of codes and scales, counted as held); embedding row, norms and LM head are counted in the float dtype',
        }),
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

/**
 * Wraps a loaded model for the structured suite: generations from a text prompt (greedy unless the suite's draw
 * says otherwise), with or without a schema.
 */
export function structuredBenchModel(model: Qwen3Model): StructuredModel {
  return {
    engine: model.engine,
    source: model.source,
    generate: async (prompt, maxTokens, schema, draw) => {
      model.forgetPrefix();
      const options: GenerateOptions = {
        temperature: 0,
        ...draw,
        maxTokens,
        ...(schema === undefined ? {} : { schema }),
      };
      return (await model.generate(prompt, options).result).stats;
    },
    dispose: () => model.dispose(),
  };
}
