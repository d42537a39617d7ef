import { Rng } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { configToHfJson, isPresetName, PRESETS, parameterCount, parseQwen3Config } from '../src/config.js';
import { QkConfigError } from '../src/errors.js';
import type { PresetName, Qwen3Config } from '../src/types.js';

/** The published Qwen3 shapes, typed in from the model cards / hub configs (not from src). */
const PUBLISHED: Record<
  Exclude<PresetName, 'tiny'>,
  [number, number, number, number, number, number, boolean]
> = {
  // hidden, layers, heads, kv heads, head dim, intermediate, tied
  '0.6b': [1024, 28, 16, 8, 128, 3072, true],
  '1.7b': [2048, 28, 16, 8, 128, 6144, true],
  '4b': [2560, 36, 32, 8, 128, 9728, true],
  '8b': [4096, 36, 32, 8, 128, 12288, false],
  '14b': [5120, 40, 40, 8, 128, 17408, false],
  '32b': [5120, 64, 64, 8, 128, 25600, false],
};

/** Qwen3-0.6B's config.json as published on the hub. */
const HUB_0_6B = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: 'qwen3',
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.51.0',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

function refusal(json: unknown): string {
  try {
    parseQwen3Config(json, '/models/x/config.json');
  } catch (e) {
    expect(e).toBeInstanceOf(QkConfigError);
    expect((e as QkConfigError).code).toBe('QK_CONFIG');
    return (e as Error).message;
  }
  throw new Error('expected parseQwen3Config to refuse');
}

describe('PRESETS', () => {
  it('have the published shapes and shared Qwen3 constants', () => {
    for (const [name, [h, layers, heads, kv, hd, inter, tied]] of Object.entries(PUBLISHED)) {
      const c = PRESETS[name as PresetName];
      expect(c, name).toMatchObject({
        hiddenSize: h,
        numLayers: layers,
        numHeads: heads,
        numKvHeads: kv,
        headDim: hd,
        intermediateSize: inter,
        tieWordEmbeddings: tied,
        vocabSize: 151936,
        ropeTheta: 1e6,
        rmsNormEps: 1e-6,
        maxPositionEmbeddings: 40960,
        torchDtype: 'bf16',
        bosTokenId: 151643,
      });
      expect(c.eosTokenIds).toEqual([151645, 151643]);
    }
    expect(PRESETS.tiny).toMatchObject({
      vocabSize: 151936,
      hiddenSize: 128,
      numLayers: 4,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 32,
      intermediateSize: 384,
      tieWordEmbeddings: true,
      maxPositionEmbeddings: 4096,
    });
    expect(Object.isFrozen(PRESETS['8b'])).toBe(true);
  });

  it('isPresetName accepts exactly the preset names', () => {
    for (const name of ['tiny', '0.6b', '1.7b', '4b', '8b', '14b', '32b'])
      expect(isPresetName(name)).toBe(true);
    for (const name of ['0.5b', 'TINY', '', 'toString', 'constructor', 8, null])
      expect(isPresetName(name)).toBe(false);
  });
});

describe('parameterCount', () => {
  it('matches the model cards (0.6B: 0.44B non-embedding; 8B: 8.2B, 6.95B non-embedding)', () => {
    const embed = 151936;
    const p06 = parameterCount(PRESETS['0.6b']);
    expect(p06).toBeGreaterThan(0.59e9);
    expect(p06).toBeLessThan(0.61e9);
    expect((p06 - embed * 1024) / 1e9).toBeCloseTo(0.44, 2);
    const p8 = parameterCount(PRESETS['8b']);
    expect(p8 / 1e9).toBeCloseTo(8.19, 2);
    expect((p8 - 2 * embed * 4096) / 1e9).toBeCloseTo(6.95, 2);
    // 32B: 32.8B on the card.
    expect(parameterCount(PRESETS['32b']) / 1e9).toBeCloseTo(32.76, 1);
  });

  it('counts a tied head once and an untied head twice', () => {
    const tied = PRESETS.tiny;
    const untied = { ...tied, tieWordEmbeddings: false };
    expect(parameterCount(untied) - parameterCount(tied)).toBe(151936 * 128);
    // tiny by hand: embedding + 4 × (q,k,v,o + q/k norms + 3 MLP matrices + 2 norms) + final norm.
    const layer = 128 * 128 * 2 + 64 * 128 * 2 + 32 * 2 + 3 * 128 * 384 + 2 * 128;
    expect(parameterCount(tied)).toBe(151936 * 128 + 4 * layer + 128);
  });
});

describe('parseQwen3Config', () => {
  it('parses the hub Qwen3-0.6B config.json into the 0.6b preset (one EOS id)', () => {
    const c = parseQwen3Config(HUB_0_6B);
    expect(c).toEqual({ ...PRESETS['0.6b'], eosTokenIds: [151645] });
  });

  it('round-trips every preset through configToHfJson', () => {
    for (const [name, c] of Object.entries(PRESETS)) {
      const json = JSON.parse(JSON.stringify(configToHfJson(c)));
      expect(parseQwen3Config(json, name), name).toEqual(c);
    }
  });

  it('configToHfJson carries what transformers needs', () => {
    const json = configToHfJson(PRESETS['8b']);
    expect(json).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      hidden_act: 'silu',
      attention_bias: false,
      rope_scaling: null,
      use_sliding_window: false,
      sliding_window: null,
      max_window_layers: 36,
      initializer_range: 0.02,
      torch_dtype: 'bfloat16',
      tie_word_embeddings: false,
      eos_token_id: [151645, 151643],
      head_dim: 128,
    });
    expect(configToHfJson({ ...PRESETS.tiny, torchDtype: 'f16' }).torch_dtype).toBe('float16');
    expect(configToHfJson({ ...PRESETS.tiny, torchDtype: 'f32' }).torch_dtype).toBe('float32');
  });

  it('maps random valid configs field by field', () => {
    const rng = new Rng(20250501);
    for (let trial = 0; trial < 50; trial++) {
      const kv = 1 + rng.nextInt(8);
      const heads = kv * (1 + rng.nextInt(6));
      const headDim = 8 * (1 + rng.nextInt(32));
      const json = {
        architectures: ['Qwen3ForCausalLM'],
        model_type: 'qwen3',
        hidden_size: 1 + rng.nextInt(5000),
        num_hidden_layers: 1 + rng.nextInt(80),
        num_attention_heads: heads,
        num_key_value_heads: kv,
        head_dim: headDim,
        intermediate_size: 1 + rng.nextInt(30000),
        vocab_size: 1 + rng.nextInt(200000),
        rope_theta: 1 + rng.nextFloat() * 1e7,
        rms_norm_eps: rng.nextFloat() * 1e-4 + 1e-9,
        max_position_embeddings: 1 + rng.nextInt(1 << 20),
        tie_word_embeddings: rng.nextInt(2) === 1,
        torch_dtype: ['bfloat16', 'float16', 'float32'][rng.nextInt(3)],
        bos_token_id: rng.nextInt(1000),
        eos_token_id: rng.nextInt(2) === 1 ? rng.nextInt(1000) : [rng.nextInt(1000), rng.nextInt(1000)],
      };
      const c = parseQwen3Config(json);
      const expected: Qwen3Config = {
        hiddenSize: json.hidden_size,
        numLayers: json.num_hidden_layers,
        numHeads: heads,
        numKvHeads: kv,
        headDim,
        intermediateSize: json.intermediate_size,
        vocabSize: json.vocab_size,
        ropeTheta: json.rope_theta,
        rmsNormEps: json.rms_norm_eps,
        tieWordEmbeddings: json.tie_word_embeddings,
        maxPositionEmbeddings: json.max_position_embeddings,
        torchDtype: ({ bfloat16: 'bf16', float16: 'f16', float32: 'f32' } as const)[
          json.torch_dtype as 'bfloat16' | 'float16' | 'float32'
        ],
        bosTokenId: json.bos_token_id,
        eosTokenIds: Array.isArray(json.eos_token_id) ? json.eos_token_id : [json.eos_token_id],
      };
      expect(c).toEqual(expected);
    }
  });

  it('defaults what transformers defaults, and reads v5 names (dtype, rope_parameters)', () => {
    const minimal = {
      model_type: 'qwen3',
      hidden_size: 96,
      num_hidden_layers: 2,
      num_attention_heads: 6,
      intermediate_size: 200,
      vocab_size: 1000,
    };
    expect(parseQwen3Config(minimal)).toEqual({
      hiddenSize: 96,
      numLayers: 2,
      numHeads: 6,
      numKvHeads: 6,
      headDim: 16,
      intermediateSize: 200,
      vocabSize: 1000,
      ropeTheta: 10000,
      rmsNormEps: 1e-6,
      tieWordEmbeddings: false,
      maxPositionEmbeddings: 32768,
      torchDtype: 'bf16',
      eosTokenIds: [],
    });
    const v5 = {
      ...minimal,
      dtype: 'float32',
      rope_parameters: { rope_type: 'default', rope_theta: 5e5 },
      layer_types: ['full_attention', 'full_attention'],
    };
    expect(parseQwen3Config(v5)).toMatchObject({ torchDtype: 'f32', ropeTheta: 5e5 });
    expect(parseQwen3Config({ ...minimal, torch_dtype: 'torch.float16' }).torchDtype).toBe('f16');
  });

  it('refuses other architectures and model types, naming them', () => {
    expect(refusal({ ...HUB_0_6B, architectures: ['LlamaForCausalLM'] })).toMatch(
      /\/models\/x\/config\.json.*"LlamaForCausalLM".*not Qwen3ForCausalLM/,
    );
    expect(refusal({ ...HUB_0_6B, model_type: 'qwen2' })).toContain('"qwen2"');
    expect(refusal({ ...HUB_0_6B, architectures: ['Qwen3MoeForCausalLM'], model_type: 'qwen3_moe' })).toMatch(
      /Qwen3MoeForCausalLM.*mixture-of-experts/,
    );
    expect(refusal({ hidden_size: 8 })).toMatch(/neither "architectures" nor "model_type"/);
    expect(refusal([1, 2])).toMatch(/JSON object/);
    expect(refusal(null)).toMatch(/JSON object/);
  });

  it('refuses MoE keys, rope scaling, sliding windows, biases and other activations', () => {
    expect(refusal({ ...HUB_0_6B, num_experts: 128, num_experts_per_tok: 8 })).toMatch(
      /mixture-of-experts.*num_experts, num_experts_per_tok/,
    );
    expect(refusal({ ...HUB_0_6B, moe_intermediate_size: 768 })).toContain('moe_intermediate_size');
    expect(refusal({ ...HUB_0_6B, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toMatch(
      /rope_scaling.*yarn/,
    );
    expect(refusal({ ...HUB_0_6B, use_sliding_window: true })).toContain('use_sliding_window');
    expect(refusal({ ...HUB_0_6B, layer_types: ['full_attention', 'sliding_attention'] })).toContain(
      '"sliding_attention"',
    );
    expect(refusal({ ...HUB_0_6B, attention_bias: true })).toContain('attention_bias');
    expect(refusal({ ...HUB_0_6B, hidden_act: 'gelu' })).toMatch(/hidden_act is "gelu"/);
    // Present-but-empty MoE keys and default rope settings are not refusals.
    expect(() =>
      parseQwen3Config({ ...HUB_0_6B, num_experts: 0, rope_scaling: { rope_type: 'default' } }),
    ).not.toThrow();
  });

  it('refuses bad sizes and lists every problem, including all missing fields, in one message', () => {
    expect(refusal({ ...HUB_0_6B, num_key_value_heads: 6 })).toMatch(
      /16 is not divisible by num_key_value_heads 6/,
    );
    expect(refusal({ ...HUB_0_6B, hidden_size: 0 })).toMatch(/hidden_size must be a positive integer, got 0/);
    expect(refusal({ ...HUB_0_6B, intermediate_size: 3072.5 })).toContain('intermediate_size');
    expect(refusal({ ...HUB_0_6B, vocab_size: '151936' })).toContain('vocab_size');
    expect(refusal({ ...HUB_0_6B, rms_norm_eps: -1 })).toContain('rms_norm_eps');
    expect(refusal({ ...HUB_0_6B, torch_dtype: 'int8' })).toContain('torch_dtype "int8"');
    expect(refusal({ ...HUB_0_6B, eos_token_id: ['x'] })).toContain('eos_token_id');
    const { hidden_size: _h, vocab_size: _v, ...rest } = HUB_0_6B;
    const missing = refusal({ ...rest, attention_bias: true });
    expect(missing).toMatch(/required fields hidden_size, vocab_size missing/);
    expect(missing).toContain('attention_bias');
    expect(missing).toContain('(2 problems)');
    const { head_dim: _d, ...noHeadDim } = HUB_0_6B;
    expect(refusal({ ...noHeadDim, hidden_size: 1000, num_attention_heads: 16 })).toMatch(
      /head_dim is absent/,
    );
  });
});
