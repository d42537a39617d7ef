/**
 * The tensors a Qwen3 checkpoint holds under HF's names, how they map onto {@link Qwen3Weights}, and the check of
 * a checkpoint's tensors against a config (every problem collected into one message).
 */
import type { FloatDType, Tensor } from '@qk/ops';
import { floatDTypeOf, type SafetensorsTensorInfo } from '../safetensors/format.js';
import type { LayerWeights, Qwen3Config, Qwen3Weights } from '../types.js';
import { safeText } from '../untrusted.js';

/** Names (or groups of names) an error lists before it says how many more there are. */
const MAX_LISTED_NAMES = 20;

/** A tensor a checkpoint must hold: HF name and shape. */
export interface ExpectedTensor {
  readonly name: string;
  readonly shape: readonly number[];
}

export const EMBED_NAME = 'model.embed_tokens.weight';
export const FINAL_NORM_NAME = 'model.norm.weight';
export const LM_HEAD_NAME = 'lm_head.weight';

type LayerKey = keyof LayerWeights;

/** Per-layer tensors in the order HF's `Qwen3DecoderLayer` registers them (so files match `save_pretrained`'s). */
const LAYER_TENSORS: readonly { suffix: string; key: LayerKey; shape: (c: Qwen3Config) => number[] }[] = [
  { suffix: 'self_attn.q_proj.weight', key: 'q', shape: (c) => [c.numHeads * c.headDim, c.hiddenSize] },
  { suffix: 'self_attn.k_proj.weight', key: 'k', shape: (c) => [c.numKvHeads * c.headDim, c.hiddenSize] },
  { suffix: 'self_attn.v_proj.weight', key: 'v', shape: (c) => [c.numKvHeads * c.headDim, c.hiddenSize] },
  { suffix: 'self_attn.o_proj.weight', key: 'o', shape: (c) => [c.hiddenSize, c.numHeads * c.headDim] },
  { suffix: 'self_attn.q_norm.weight', key: 'qNorm', shape: (c) => [c.headDim] },
  { suffix: 'self_attn.k_norm.weight', key: 'kNorm', shape: (c) => [c.headDim] },
  { suffix: 'mlp.gate_proj.weight', key: 'gate', shape: (c) => [c.intermediateSize, c.hiddenSize] },
  { suffix: 'mlp.up_proj.weight', key: 'up', shape: (c) => [c.intermediateSize, c.hiddenSize] },
  { suffix: 'mlp.down_proj.weight', key: 'down', shape: (c) => [c.hiddenSize, c.intermediateSize] },
  { suffix: 'input_layernorm.weight', key: 'inputNorm', shape: (c) => [c.hiddenSize] },
  { suffix: 'post_attention_layernorm.weight', key: 'postNorm', shape: (c) => [c.hiddenSize] },
];

function layerTensorName(layer: number, suffix: string): string {
  return `model.layers.${layer}.${suffix}`;
}

/**
 * Every tensor a checkpoint of `config` holds, with HF names and shapes, in `save_pretrained` order. A tied model
 * has no `lm_head.weight` (transformers does not save it; one that is present is tolerated and ignored).
 */
export function expectedTensors(config: Qwen3Config): ExpectedTensor[] {
  const out: ExpectedTensor[] = [{ name: EMBED_NAME, shape: [config.vocabSize, config.hiddenSize] }];
  for (let i = 0; i < config.numLayers; i++) {
    for (const t of LAYER_TENSORS) out.push({ name: layerTensorName(i, t.suffix), shape: t.shape(config) });
  }
  out.push({ name: FINAL_NORM_NAME, shape: [config.hiddenSize] });
  if (!config.tieWordEmbeddings)
    out.push({ name: LM_HEAD_NAME, shape: [config.vocabSize, config.hiddenSize] });
  return out;
}

/** Builds the weights structure from tensors looked up by HF name; a tied LM head is the embedding object itself. */
export function assembleWeights<D extends FloatDType>(
  config: Qwen3Config,
  get: (name: string) => Tensor<D>,
): Qwen3Weights<D> {
  const layers: LayerWeights<D>[] = [];
  for (let i = 0; i < config.numLayers; i++) {
    const layer = {} as Record<LayerKey, Tensor<D>>;
    for (const t of LAYER_TENSORS) layer[t.key] = get(layerTensorName(i, t.suffix));
    layers.push(Object.freeze(layer));
  }
  const embed = get(EMBED_NAME);
  return Object.freeze({
    embed,
    layers: Object.freeze(layers),
    norm: get(FINAL_NORM_NAME),
    lmHead: config.tieWordEmbeddings ? embed : get(LM_HEAD_NAME),
  });
}

/** Releases every tensor of `weights` once (a tied LM head is the embedding, so it is not disposed twice). */
export function disposeWeights(weights: Qwen3Weights): void {
  const seen = new Set<Tensor>([weights.embed, weights.norm, weights.lmHead]);
  for (const layer of weights.layers) for (const t of Object.values(layer)) seen.add(t);
  for (const t of seen) t.dispose();
}

/**
 * Names compressed by layer index, e.g. `model.layers.{0-27}.mlp.gate_proj.weight`, so that a list of every
 * missing tensor of a 64-layer model stays readable while still naming them all.
 */
export function summarizeNames(names: readonly string[]): string {
  const groups = new Map<string, { prefix: string; suffix: string; layers: number[] }>();
  for (const name of names) {
    const m = /^(.*\.layers\.)(\d+)(\..*)$/.exec(name);
    const key = m ? `${m[1]}{}${m[3]}` : name;
    const group = groups.get(key) ?? { prefix: m ? m[1]! : name, suffix: m ? m[3]! : '', layers: [] };
    if (m) group.layers.push(Number(m[2]));
    groups.set(key, group);
  }
  const parts: string[] = [];
  for (const { prefix, suffix, layers } of groups.values()) {
    if (parts.length === MAX_LISTED_NAMES) break;
    if (layers.length === 0) parts.push(safeText(prefix, 100));
    else if (layers.length === 1) parts.push(safeText(`${prefix}${layers[0]}${suffix}`, 100));
    else parts.push(safeText(`${prefix}{${formatRanges(layers)}}${suffix}`, 160));
  }
  const more = groups.size - parts.length;
  return `${parts.join(', ')}${more > 0 ? `, and ${more} more` : ''}`;
}

function formatRanges(values: number[]): string {
  const sorted = [...new Set(values)].sort((a, b) => a - b);
  const ranges: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    ranges.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return ranges.join(',');
}

function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/**
 * Every way the checkpoint's tensors disagree with `config`: missing and unexpected names (one entry each),
 * shape mismatches, and dtypes that cannot load as weights. Empty when the checkpoint fits.
 */
export function checkpointProblems(
  tensors: ReadonlyMap<string, SafetensorsTensorInfo>,
  config: Qwen3Config,
): string[] {
  const expected = expectedTensors(config);
  const expectedNames = new Set(expected.map((t) => t.name));
  const problems: string[] = [];
  const missing = expected.filter((t) => !tensors.has(t.name)).map((t) => t.name);
  const unexpected = [...tensors.keys()].filter(
    (n) => !expectedNames.has(n) && !(config.tieWordEmbeddings && n === LM_HEAD_NAME),
  );
  if (missing.length > 0) {
    problems.push(
      `${missing.length} tensor${missing.length > 1 ? 's' : ''} missing: ${summarizeNames(missing)}`,
    );
  }
  if (unexpected.length > 0) {
    problems.push(
      `${unexpected.length} unexpected tensor${unexpected.length > 1 ? 's' : ''}: ${summarizeNames(unexpected)}`,
    );
  }
  for (const t of expected) {
    const info = tensors.get(t.name);
    if (info === undefined) continue;
    if (info.shape.length !== t.shape.length || info.shape.some((d, i) => d !== t.shape[i])) {
      problems.push(
        `${safeText(t.name)} has shape ${formatShape(info.shape)}, expected ${formatShape(t.shape)}`,
      );
    }
    if (floatDTypeOf(info.dtype) === undefined) {
      problems.push(`${t.name} is ${info.dtype}; only BF16, F16 and F32 tensors load as weights`);
    }
  }
  return problems;
}
