/**
 * Qwen3 configurations: parsing HF `config.json` for dense `Qwen3ForCausalLM`, the published presets, writing a
 * `config.json` that transformers accepts, and counting parameters.
 */
import type { FloatDType } from '@qk/ops';
import { QkConfigError, QkLimitError } from './errors.js';
import type { PresetName, Qwen3Config } from './types.js';
import { describeValue } from './untrusted.js';

/** The special-token ids every Qwen3 checkpoint shares (`<|endoftext|>`, `<|im_end|>`). */
const ENDOFTEXT_ID = 151643;
const IM_END_ID = 151645;
const QWEN3_VOCAB = 151936;

function preset(
  hiddenSize: number,
  numLayers: number,
  numHeads: number,
  intermediateSize: number,
  tieWordEmbeddings: boolean,
): Qwen3Config {
  return Object.freeze({
    hiddenSize,
    numLayers,
    numHeads,
    numKvHeads: 8,
    headDim: 128,
    intermediateSize,
    vocabSize: QWEN3_VOCAB,
    ropeTheta: 1_000_000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings,
    maxPositionEmbeddings: 40960,
    torchDtype: 'bf16',
    bosTokenId: ENDOFTEXT_ID,
    eosTokenIds: Object.freeze([IM_END_ID, ENDOFTEXT_ID]),
  });
}

/**
 * The built-in configurations: the published Qwen3 dense shapes, and `tiny` for tests (the real vocabulary, so the
 * real tokenizer works with it, and a few small layers).
 */
export const PRESETS: Readonly<Record<PresetName, Qwen3Config>> = Object.freeze({
  tiny: Object.freeze({
    hiddenSize: 128,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 32,
    intermediateSize: 384,
    vocabSize: QWEN3_VOCAB,
    ropeTheta: 1_000_000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: true,
    maxPositionEmbeddings: 4096,
    torchDtype: 'bf16',
    bosTokenId: ENDOFTEXT_ID,
    eosTokenIds: Object.freeze([IM_END_ID, ENDOFTEXT_ID]),
  }),
  '0.6b': preset(1024, 28, 16, 3072, true),
  '1.7b': preset(2048, 28, 16, 6144, true),
  '4b': preset(2560, 36, 32, 9728, true),
  '8b': preset(4096, 36, 32, 12288, false),
  '14b': preset(5120, 40, 40, 17408, false),
  '32b': preset(5120, 64, 64, 25600, false),
});

/** Whether `name` is one of {@link PRESETS}' keys. */
export function isPresetName(name: unknown): name is PresetName {
  return typeof name === 'string' && Object.hasOwn(PRESETS, name);
}

const TORCH_DTYPES: Readonly<Record<string, FloatDType>> = {
  bfloat16: 'bf16',
  float16: 'f16',
  half: 'f16',
  float32: 'f32',
  float: 'f32',
};

const HF_DTYPE_NAMES: Readonly<Record<FloatDType, string>> = {
  bf16: 'bfloat16',
  f16: 'float16',
  f32: 'float32',
};

/**
 * Largest value qk accepts for each size of `config.json`, checked before anything is allocated (the largest
 * published dense models stay far below: 64 layers, hidden 8192, vocabularies of 256k, contexts of 1M).
 */
export const CONFIG_MAXIMA: Readonly<Record<string, number>> = Object.freeze({
  hidden_size: 65_536,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  num_key_value_heads: 1024,
  head_dim: 1024,
  intermediate_size: 1 << 20,
  vocab_size: 1 << 24,
  max_position_embeddings: 1 << 24,
});

/** Most parameters a config may describe (10^12: no dense model of that size fits any one machine qk serves). */
export const MAX_PARAMETERS = 1e12;

/** Keys whose presence (with a non-empty value) marks a mixture-of-experts config. */
const MOE_KEYS = [
  'num_experts',
  'num_local_experts',
  'n_routed_experts',
  'num_experts_per_tok',
  'moe_intermediate_size',
  'shared_expert_intermediate_size',
] as const;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rope settings that mean "no scaling": transformers v5 writes `{rope_type: 'default', rope_theta}` even then. */
function isDefaultRope(value: Record<string, unknown>): boolean {
  const type = value.rope_type ?? value.type;
  return type === undefined || type === 'default';
}

/**
 * Checks the fields that decide whether this is a model we can run at all. An unrelated architecture gets one
 * sentence naming it instead of a list of missing fields that would only confuse.
 */
function checkArchitecture(json: Record<string, unknown>, where: string): void {
  const { architectures, model_type: modelType } = json;
  if (architectures === undefined && modelType === undefined) {
    throw new QkConfigError(
      `${where} names neither "architectures" nor "model_type"; a Qwen3 config.json has architectures ["Qwen3ForCausalLM"] and model_type "qwen3".`,
    );
  }
  const archList = Array.isArray(architectures) ? architectures : [architectures];
  if (architectures !== undefined && !archList.includes('Qwen3ForCausalLM')) {
    const names = `${archList
      .slice(0, 5)
      .map((a) => describeValue(a))
      .join(', ')}${archList.length > 5 ? ', …' : ''}`;
    const moe = archList.some((a) => typeof a === 'string' && /moe/i.test(a));
    throw new QkConfigError(
      `${where} is for ${names}, not Qwen3ForCausalLM; ${moe ? 'mixture-of-experts Qwen3 models are not supported, only the dense ones' : 'qk runs dense Qwen3 models only'}.`,
    );
  }
  if (modelType !== undefined && modelType !== 'qwen3') {
    throw new QkConfigError(
      `${where} has model_type ${describeValue(modelType)}, expected "qwen3"; ${modelType === 'qwen3_moe' ? 'mixture-of-experts Qwen3 models are not supported, only the dense ones' : 'qk runs dense Qwen3 models only'}.`,
    );
  }
}

function parseTorchDtype(value: unknown, problems: string[]): FloatDType {
  // transformers v5 renamed torch_dtype to dtype; either may be absent in hand-written configs.
  if (value === undefined || value === null || value === 'auto') return 'bf16';
  if (typeof value === 'string') {
    const found = TORCH_DTYPES[value.replace(/^torch\./, '')];
    if (found !== undefined) return found;
  }
  problems.push(`torch_dtype ${describeValue(value)} is not one of bfloat16, float16, float32`);
  return 'bf16';
}

function parseEos(value: unknown, problems: string[]): readonly number[] {
  if (value === undefined || value === null) return Object.freeze([]);
  const list = Array.isArray(value) ? value : [value];
  if (!list.every((v) => Number.isSafeInteger(v) && (v as number) >= 0)) {
    problems.push(`eos_token_id must be a token id or a list of them, got ${describeValue(value)}`);
    return Object.freeze([]);
  }
  return Object.freeze([...(list as number[])]);
}

/**
 * Parses a HF `config.json` of a dense Qwen3 model (`Qwen3ForCausalLM`, `model_type` `"qwen3"`).
 *
 * Fields that transformers defaults are defaulted the same way (`num_key_value_heads` to the head count, `head_dim`
 * to `hidden_size / num_attention_heads`, `rope_theta` 10000, `rms_norm_eps` 1e-6, `max_position_embeddings` 32768,
 * `tie_word_embeddings` false); a missing `torch_dtype` means bf16, the dtype Qwen3 is published in.
 *
 * @param json the parsed `config.json`.
 * @param source where it came from (a path), used in error messages.
 * @throws QkConfigError for another architecture, a mixture-of-experts model, rope scaling, sliding-window
 *   attention, attention biases, an activation other than SiLU, inconsistent head counts, non-positive or
 *   non-integer sizes, or missing required fields; every problem found is listed in one message.
 */
export function parseQwen3Config(json: unknown, source = 'config.json'): Qwen3Config {
  if (!isPlainObject(json)) {
    throw new QkConfigError(
      `${source} must hold a JSON object, got ${json === null ? 'null' : typeof json}.`,
    );
  }
  checkArchitecture(json, source);
  const problems: string[] = [];

  const moeKeys = MOE_KEYS.filter((k) => json[k] !== undefined && json[k] !== null && json[k] !== 0);
  if (moeKeys.length > 0) {
    throw new QkConfigError(
      `${source} describes a mixture-of-experts model (${moeKeys.join(', ')}); qk runs dense Qwen3 models only.`,
    );
  }

  const missing = [
    'hidden_size',
    'num_hidden_layers',
    'num_attention_heads',
    'intermediate_size',
    'vocab_size',
  ].filter((k) => json[k] === undefined || json[k] === null);
  if (missing.length > 0)
    problems.push(`required field${missing.length > 1 ? 's' : ''} ${missing.join(', ')} missing`);

  const size = (key: string, fallback?: number): number => {
    const value = json[key] ?? fallback;
    if (value === undefined || value === null) return 0; // already reported as missing
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      problems.push(`${key} must be a positive integer, got ${describeValue(value)}`);
      return 0;
    }
    const max = CONFIG_MAXIMA[key];
    if (max !== undefined && value > max) {
      problems.push(`${key} ${value} is above qk's limit of ${max}`);
      return 0;
    }
    return value;
  };
  const positive = (key: string, fallback: number): number => {
    const value = json[key] ?? fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      problems.push(`${key} must be a positive number, got ${describeValue(value)}`);
      return fallback;
    }
    return value;
  };

  const hiddenSize = size('hidden_size');
  const numLayers = size('num_hidden_layers');
  const numHeads = size('num_attention_heads');
  const numKvHeads = size('num_key_value_heads', numHeads || undefined);
  const intermediateSize = size('intermediate_size');
  const vocabSize = size('vocab_size');
  const maxPositionEmbeddings = size('max_position_embeddings', 32768);
  let headDim = 0;
  if (json.head_dim !== undefined && json.head_dim !== null) headDim = size('head_dim');
  else if (hiddenSize > 0 && numHeads > 0) {
    if (hiddenSize % numHeads === 0) headDim = hiddenSize / numHeads;
    else
      problems.push(
        `head_dim is absent and hidden_size ${hiddenSize} is not divisible by num_attention_heads ${numHeads}; add head_dim`,
      );
  }
  if (numHeads > 0 && numKvHeads > 0 && numHeads % numKvHeads !== 0) {
    problems.push(
      `num_attention_heads ${numHeads} is not divisible by num_key_value_heads ${numKvHeads}, so query heads cannot share key/value heads evenly`,
    );
  }

  // transformers v5 moves rope_theta into rope_parameters; read it from there when present.
  const ropeParameters = isPlainObject(json.rope_parameters) ? json.rope_parameters : undefined;
  let ropeTheta = positive('rope_theta', 10000);
  if (
    ropeParameters !== undefined &&
    json.rope_theta === undefined &&
    ropeParameters.rope_theta !== undefined
  ) {
    const theta = ropeParameters.rope_theta;
    if (typeof theta === 'number' && Number.isFinite(theta) && theta > 0) ropeTheta = theta;
    else problems.push(`rope_parameters.rope_theta must be a positive number, got ${describeValue(theta)}`);
  }
  for (const key of ['rope_scaling', 'rope_parameters'] as const) {
    const value = json[key];
    if (value === undefined || value === null) continue;
    if (!isPlainObject(value) || !isDefaultRope(value)) {
      problems.push(
        `${key} ${describeValue(value)} asks for rope scaling, which qk does not implement (only plain RoPE)`,
      );
    }
  }
  const rmsNormEps = positive('rms_norm_eps', 1e-6);

  if (json.use_sliding_window === true) {
    problems.push('use_sliding_window is true; qk implements full attention only');
  }
  if (Array.isArray(json.layer_types)) {
    const sliding = json.layer_types.filter((t) => t !== 'full_attention');
    if (sliding.length > 0) {
      problems.push(
        `layer_types contains ${[...new Set(sliding.slice(0, 1000).map((t) => describeValue(t, 40)))].slice(0, 5).join(', ')}; qk implements full attention only`,
      );
    }
  }
  if (json.attention_bias === true) {
    problems.push('attention_bias is true; Qwen3 projections have no bias and qk does not load one');
  }
  const act = json.hidden_act ?? 'silu';
  if (act !== 'silu')
    problems.push(`hidden_act is ${describeValue(act)}; qk implements the SiLU (SwiGLU) MLP only`);

  const tie = json.tie_word_embeddings ?? false;
  if (typeof tie !== 'boolean')
    problems.push(`tie_word_embeddings must be true or false, got ${describeValue(tie)}`);
  const torchDtype = parseTorchDtype(json.dtype ?? json.torch_dtype, problems);
  const eosTokenIds = parseEos(json.eos_token_id, problems);
  const bos = json.bos_token_id;
  if (bos !== undefined && bos !== null && !(Number.isSafeInteger(bos) && (bos as number) >= 0)) {
    problems.push(`bos_token_id must be a token id, got ${describeValue(bos)}`);
  }

  if (problems.length === 0) {
    const h = hiddenSize;
    const count =
      vocabSize * h * 2 + numLayers * (h * headDim * (numHeads + numKvHeads) * 2 + 3 * h * intermediateSize);
    if (count > MAX_PARAMETERS) {
      throw new QkLimitError(
        source,
        'hidden_size × num_hidden_layers × …',
        `${MAX_PARAMETERS} parameters`,
        `describes about ${count.toExponential(2)} parameters`,
      );
    }
  }
  if (problems.length > 0) {
    throw new QkConfigError(
      `${source} cannot be run by qk: ${problems.join('; ')}.${problems.length > 1 ? ` (${problems.length} problems)` : ''}`,
    );
  }
  const config: Qwen3Config = {
    hiddenSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    intermediateSize,
    vocabSize,
    ropeTheta,
    rmsNormEps,
    tieWordEmbeddings: tie === true,
    maxPositionEmbeddings,
    torchDtype,
    ...(typeof bos === 'number' ? { bosTokenId: bos } : {}),
    eosTokenIds,
  };
  return Object.freeze(config);
}

/**
 * A `config.json` object for `config` that transformers' `Qwen3Config` / `AutoModelForCausalLM` accepts, with the
 * fields the hub's Qwen3 configs carry (`hidden_act` "silu", no attention bias, no rope scaling, no sliding window,
 * `initializer_range` 0.02).
 */
export function configToHfJson(config: Qwen3Config): Record<string, unknown> {
  const eos = config.eosTokenIds;
  return {
    architectures: ['Qwen3ForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    ...(config.bosTokenId !== undefined ? { bos_token_id: config.bosTokenId } : {}),
    ...(eos.length > 0 ? { eos_token_id: eos.length === 1 ? eos[0] : [...eos] } : {}),
    head_dim: config.headDim,
    hidden_act: 'silu',
    hidden_size: config.hiddenSize,
    initializer_range: 0.02,
    intermediate_size: config.intermediateSize,
    max_position_embeddings: config.maxPositionEmbeddings,
    max_window_layers: config.numLayers,
    model_type: 'qwen3',
    num_attention_heads: config.numHeads,
    num_hidden_layers: config.numLayers,
    num_key_value_heads: config.numKvHeads,
    rms_norm_eps: config.rmsNormEps,
    rope_scaling: null,
    rope_theta: config.ropeTheta,
    sliding_window: null,
    tie_word_embeddings: config.tieWordEmbeddings,
    torch_dtype: HF_DTYPE_NAMES[config.torchDtype],
    use_cache: true,
    use_sliding_window: false,
    vocab_size: config.vocabSize,
  };
}

/** Number of weights of the model; a tied LM head shares the embedding and is counted once. */
export function parameterCount(config: Qwen3Config): number {
  const { hiddenSize: h, numHeads, numKvHeads, headDim, intermediateSize, vocabSize } = config;
  const attention = h * numHeads * headDim * 2 + h * numKvHeads * headDim * 2 + headDim * 2;
  const layer = attention + 3 * h * intermediateSize + 2 * h;
  return vocabSize * h * (config.tieWordEmbeddings ? 1 : 2) + config.numLayers * layer + h;
}
