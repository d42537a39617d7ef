import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  bf16BitsToF32,
  cudaAvailable,
  type FloatDType,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  QkDeviceError,
  Rng,
  Tensor,
} from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { describeCheckpoint, writeRandomCheckpoint } from '../src/checkpoint/files.js';
import { disposeWeights, expectedTensors } from '../src/checkpoint/layout.js';
import { loadWeights } from '../src/checkpoint/load.js';
import { randomTensorBytes, randomTensors, randomWeights } from '../src/checkpoint/random.js';
import { PRESETS, parameterCount, parseQwen3Config } from '../src/config.js';
import { QkAbortError, QkCheckpointError } from '../src/errors.js';
import type { SafetensorsDType } from '../src/safetensors/format.js';
import { type WritableTensor, writeShardedSafetensors } from '../src/safetensors/writer.js';
import type { Qwen3Config, Qwen3Weights } from '../src/types.js';

let root: string;
let counter = 0;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-checkpoint-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
const fresh = (name: string) => join(root, `${counter++}-${name}`);

/** Small enough to hold every dtype combination in memory at once; untied so lm_head is exercised. */
const MICRO: Qwen3Config = {
  hiddenSize: 16,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
  intermediateSize: 24,
  vocabSize: 96,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  maxPositionEmbeddings: 64,
  torchDtype: 'f32',
  eosTokenIds: [3],
};

/** HF names and shapes of MICRO, typed in from the Qwen3 module layout (not from src). */
function microNames(): [string, number[]][] {
  const out: [string, number[]][] = [['model.embed_tokens.weight', [96, 16]]];
  for (let i = 0; i < 2; i++) {
    const p = `model.layers.${i}.`;
    out.push(
      [`${p}self_attn.q_proj.weight`, [16, 16]],
      [`${p}self_attn.k_proj.weight`, [8, 16]],
      [`${p}self_attn.v_proj.weight`, [8, 16]],
      [`${p}self_attn.o_proj.weight`, [16, 16]],
      [`${p}self_attn.q_norm.weight`, [8]],
      [`${p}self_attn.k_norm.weight`, [8]],
      [`${p}mlp.gate_proj.weight`, [24, 16]],
      [`${p}mlp.up_proj.weight`, [24, 16]],
      [`${p}mlp.down_proj.weight`, [16, 24]],
      [`${p}input_layernorm.weight`, [16]],
      [`${p}post_attention_layernorm.weight`, [16]],
    );
  }
  out.push(['model.norm.weight', [16]], ['lm_head.weight', [96, 16]]);
  return out;
}

const F32_SPECIALS = [
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  -0,
  1e-40, // f32 subnormal
  1e-6, // f16 subnormal
  70000, // beyond f16: rounds to inf
  3.4e38, // near f32 max: rounds to bf16 inf
];

/** Random source values of `dtype`, as raw bytes, with special values sprinkled in. */
function sourceBytes(rng: Rng, dtype: FloatDType, n: number): Uint8Array {
  if (dtype === 'f32') {
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = rng.nextNormal() * 10 ** (rng.nextInt(7) - 3);
    for (let i = 0; i < Math.min(n, 2 * F32_SPECIALS.length); i++) {
      v[rng.nextInt(n)] = F32_SPECIALS[i % F32_SPECIALS.length]!;
    }
    // Exact bf16 ties, one rounding down to even and one up.
    new Uint32Array(v.buffer)[0] = 0x3f808000;
    if (n > 1) new Uint32Array(v.buffer)[1] = 0x3f818000;
    return new Uint8Array(v.buffer);
  }
  const bits = new Uint16Array(n);
  for (let i = 0; i < n; i++) bits[i] = rng.nextInt(65536);
  return new Uint8Array(bits.buffer);
}

/** What one element of `from` should become in `to`, from @qk/ops' scalar conversions. */
function expectedElements(bytes: Uint8Array, from: FloatDType, to: FloatDType): number[] {
  const values =
    from === 'f32'
      ? Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4))
      : Array.from(
          new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2),
          from === 'bf16' ? bf16BitsToF32 : f16BitsToF32,
        );
  if (to === 'f32') return values.map(Math.fround);
  if (from === to) return Array.from(new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2));
  return values.map(to === 'bf16' ? f32ToBf16Bits : f32ToF16Bits);
}

/** Index of the first differing element (NaN equals NaN), or -1: large arrays must not reach a diff printer. */
function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

const ST: Record<FloatDType, SafetensorsDType> = { bf16: 'BF16', f16: 'F16', f32: 'F32' };

interface MicroTensor extends WritableTensor {
  readonly bytes: Uint8Array;
  readonly source: FloatDType;
}

/** MICRO's tensors with source dtypes round-robin over f32, f16, bf16 so one load covers every conversion. */
function microTensors(seed: number): MicroTensor[] {
  const rng = new Rng(seed);
  const order: FloatDType[] = ['f32', 'f16', 'bf16'];
  return microNames().map(([name, shape], i) => {
    const source = order[i % 3]!;
    const n = shape.reduce((a, b) => a * b, 1);
    return { name, shape, source, dtype: ST[source], bytes: sourceBytes(rng, source, n) };
  });
}

async function writeMicro(tensors: readonly WritableTensor[], dir = fresh('micro')): Promise<string> {
  await writeShardedSafetensors(dir, tensors);
  return dir;
}

function byName(weights: Qwen3Weights, config: Qwen3Config): Map<string, Tensor> {
  const names = expectedTensors(config).map((t) => t.name);
  const tensors: Tensor[] = [weights.embed];
  for (const l of weights.layers) {
    tensors.push(l.q, l.k, l.v, l.o, l.qNorm, l.kNorm, l.gate, l.up, l.down, l.inputNorm, l.postNorm);
  }
  tensors.push(weights.norm);
  if (!config.tieWordEmbeddings) tensors.push(weights.lmHead);
  return new Map(names.map((n, i) => [n, tensors[i]!]));
}

describe('expectedTensors', () => {
  it('lists HF names and shapes; lm_head only when untied', () => {
    const untied = expectedTensors(MICRO);
    expect(untied.map((t) => [t.name, t.shape])).toEqual(microNames());
    const tied = expectedTensors({ ...MICRO, tieWordEmbeddings: true });
    expect(tied.map((t) => t.name)).toEqual(
      microNames()
        .slice(0, -1)
        .map(([n]) => n),
    );
    const tiny = expectedTensors(PRESETS.tiny);
    expect(tiny).toHaveLength(1 + 4 * 11 + 1);
    const count = tiny.reduce((s, t) => s + t.shape.reduce((a, b) => a * b, 1), 0);
    expect(count).toBe(parameterCount(PRESETS.tiny));
  });
});

describe('loadWeights', () => {
  it('converts every source dtype to every target dtype (rounding to nearest even, specials kept)', async () => {
    const tensors = microTensors(17);
    const dir = await writeMicro(tensors);
    for (const target of ['f32', 'f16', 'bf16'] as const) {
      const weights = await loadWeights(dir, MICRO, { dtype: target });
      const loaded = byName(weights, MICRO);
      for (const t of tensors) {
        const got = loaded.get(t.name)!;
        expect(got.dtype).toBe(target);
        expect(got.shape).toEqual(t.shape);
        expect(Array.from(got.data), `${t.name} ${t.source}→${target}`).toEqual(
          expectedElements(t.bytes, t.source, target),
        );
      }
      expect(weights.lmHead).not.toBe(weights.embed);
      disposeWeights(weights);
      expect(weights.embed.disposed && weights.layers[1]!.down.disposed).toBe(true);
    }
  });

  it('shares the embedding as the LM head when tied, ignoring a stored lm_head.weight', async () => {
    const config = { ...MICRO, tieWordEmbeddings: true };
    const tensors = microTensors(3); // still includes lm_head.weight, as some exporters write it
    const dir = await writeMicro(tensors);
    const weights = await loadWeights(dir, config, { dtype: 'f32' });
    expect(weights.lmHead).toBe(weights.embed);
    expect(Array.from(weights.embed.data)).toEqual(
      expectedElements(tensors[0]!.bytes, tensors[0]!.source, 'f32'),
    );
    disposeWeights(weights);
  });

  it('reports every missing, unexpected, misshapen and unloadable tensor in one error', async () => {
    const tensors: WritableTensor[] = microTensors(5)
      .filter((t) => !t.name.endsWith('mlp.up_proj.weight'))
      .map((t) => {
        if (t.name === 'model.layers.0.self_attn.q_proj.weight')
          return { ...t, shape: [8, 16], bytes: t.bytes.subarray(0, 8 * 16 * (t.bytes.length / 256)) };
        if (t.name === 'model.norm.weight') return { ...t, dtype: 'I8' as const, bytes: new Uint8Array(16) };
        return t;
      });
    tensors.push(
      { name: 'model.layers.0.mlp.experts.0.weight', dtype: 'BF16', shape: [2], bytes: new Uint8Array(4) },
      { name: 'extra.bias', dtype: 'F32', shape: [1], bytes: new Uint8Array(4) },
    );
    const dir = await writeMicro(tensors);
    const err = await loadWeights(dir, MICRO, { dtype: 'f32' }).catch((e) => e);
    expect(err).toBeInstanceOf(QkCheckpointError);
    const message = (err as Error).message;
    expect(message).toContain(dir);
    expect(message).toContain('2 tensors missing: model.layers.{0-1}.mlp.up_proj.weight');
    expect(message).toContain('2 unexpected tensors: model.layers.0.mlp.experts.0.weight, extra.bias');
    expect(message).toContain('model.layers.0.self_attn.q_proj.weight has shape [8, 16], expected [16, 16]');
    expect(message).toContain('model.norm.weight is I8; only BF16, F16 and F32');
  });

  it('reports progress per tensor up to the total bytes', async () => {
    const tensors = microTensors(8);
    const dir = await writeMicro(tensors);
    const seen: { loadedBytes: number; totalBytes: number; tensor: string }[] = [];
    const weights = await loadWeights(dir, MICRO, { dtype: 'bf16', onProgress: (p) => seen.push(p) });
    const total = tensors.reduce((s, t) => s + t.bytes.length, 0);
    expect(seen.map((p) => p.tensor)).toEqual(microNames().map(([n]) => n));
    expect(seen.every((p) => p.totalBytes === total)).toBe(true);
    expect(seen.at(-1)!.loadedBytes).toBe(total);
    expect(seen.every((p, i) => i === 0 || p.loadedBytes > seen[i - 1]!.loadedBytes)).toBe(true);
    disposeWeights(weights);
  });

  it('stops on abort between tensors and disposes what it loaded', async () => {
    const dir = await writeMicro(microTensors(9));
    const made = vi.spyOn(Tensor, 'fromStorage');
    try {
      const controller = new AbortController();
      const onProgress = vi.fn(() => {
        if (onProgress.mock.calls.length === 4) controller.abort(new Error('enough'));
      });
      const err = await loadWeights(dir, MICRO, {
        dtype: 'f32',
        signal: controller.signal,
        onProgress,
      }).catch((e) => e);
      expect(err).toBeInstanceOf(QkAbortError);
      expect(err.message).toContain('enough');
      expect(onProgress).toHaveBeenCalledTimes(4);
      const tensors = made.mock.results.map((r) => r.value as Tensor);
      expect(tensors).toHaveLength(4);
      expect(tensors.every((t) => t.disposed)).toBe(true);
      const pre = new AbortController();
      pre.abort();
      await expect(loadWeights(dir, MICRO, { dtype: 'f32', signal: pre.signal })).rejects.toBeInstanceOf(
        QkAbortError,
      );
    } finally {
      made.mockRestore();
    }
  });

  it.runIf(!cudaAvailable())(
    'fails with a device error for cuda without a GPU, leaking nothing',
    async () => {
      const dir = await writeMicro(microTensors(10));
      const made = vi.spyOn(Tensor, 'fromStorage');
      try {
        await expect(loadWeights(dir, MICRO, { dtype: 'bf16', device: 'cuda' })).rejects.toBeInstanceOf(
          QkDeviceError,
        );
        expect(made.mock.results.every((r) => (r.value as Tensor).disposed)).toBe(true);
      } finally {
        made.mockRestore();
      }
    },
  );

  it('refuses a missing directory with a checkpoint error', async () => {
    await expect(loadWeights(fresh('nowhere'), MICRO, { dtype: 'f32' })).rejects.toThrow(/no such directory/);
  });
});

describe('random weights', () => {
  it('are normal(0, 0.02) matrices and all-one norms, deterministic per seed and name', () => {
    const tensors = [...randomTensors(PRESETS.tiny, { seed: 1, dtype: 'f32' })];
    expect(tensors.map((t) => t.name)).toEqual(expectedTensors(PRESETS.tiny).map((t) => t.name));
    const embed = new Float32Array(tensors[0]!.bytes.buffer);
    expect(embed.length).toBe(151936 * 128);
    let sum = 0;
    let sq = 0;
    let within1 = 0;
    let within2 = 0;
    for (const v of embed) {
      sum += v;
      sq += v * v;
      if (Math.abs(v) < 0.02) within1++;
      if (Math.abs(v) < 0.04) within2++;
    }
    const n = embed.length;
    expect(Math.abs(sum / n)).toBeLessThan(2e-5);
    expect(Math.sqrt(sq / n)).toBeCloseTo(0.02, 4);
    // Normal probability mass within 1σ and 2σ.
    expect(within1 / n).toBeCloseTo(0.6827, 3);
    expect(within2 / n).toBeCloseTo(0.9545, 3);
    for (const t of tensors.filter((t) => t.shape.length === 1)) {
      expect(
        new Float32Array(t.bytes.buffer).every((v) => v === 1),
        t.name,
      ).toBe(true);
    }
    const spec = { name: 'model.layers.2.mlp.down_proj.weight', shape: [128, 384] };
    const again = randomTensorBytes(spec, { seed: 1, dtype: 'f32' });
    expect(firstDifference(again, tensors.find((t) => t.name === spec.name)!.bytes)).toBe(-1);
    expect(firstDifference(randomTensorBytes(spec, { seed: 2, dtype: 'f32' }), again)).not.toBe(-1);
    const otherName = { ...spec, name: 'model.layers.3.mlp.down_proj.weight' };
    expect(firstDifference(randomTensorBytes(otherName, { seed: 1, dtype: 'f32' }), again)).not.toBe(-1);
    // Odd sizes are filled to the last element.
    const odd = new Float32Array(
      randomTensorBytes({ name: 'odd', shape: [3, 5] }, { seed: 4, dtype: 'f32' }).buffer,
    );
    expect(odd.every((v) => v !== 0 && Math.abs(v) < 0.1)).toBe(true);
  });

  it('in bf16 and f16 are the f32 values rounded', () => {
    const spec = { name: 'model.layers.0.self_attn.q_proj.weight', shape: [64, 33] };
    const f32 = new Float32Array(randomTensorBytes(spec, { seed: 77, dtype: 'f32' }).buffer);
    const bf16 = new Uint16Array(randomTensorBytes(spec, { seed: 77, dtype: 'bf16' }).buffer);
    const f16 = new Uint16Array(randomTensorBytes(spec, { seed: 77, dtype: 'f16' }).buffer);
    expect(Array.from(bf16)).toEqual(Array.from(f32, f32ToBf16Bits));
    expect(Array.from(f16)).toEqual(Array.from(f32, f32ToF16Bits));
    expect(() => randomTensorBytes(spec, { seed: -1, dtype: 'f32' })).toThrow(/seed/);
  });

  it('randomWeights equals loading the same random checkpoint; it aborts cleanly', async () => {
    const dir = fresh('rw');
    await writeRandomCheckpoint(dir, MICRO, { seed: 21, dtype: 'f16', tokenizerDir: false });
    const loaded = await loadWeights(dir, MICRO, { dtype: 'f16' });
    const made = await randomWeights(MICRO, { seed: 21, dtype: 'f16' });
    const a = byName(loaded, MICRO);
    const b = byName(made, MICRO);
    for (const [name, t] of a) expect(Array.from(b.get(name)!.data), name).toEqual(Array.from(t.data));
    disposeWeights(loaded);
    disposeWeights(made);
    const controller = new AbortController();
    const pending = randomWeights(MICRO, {
      seed: 1,
      dtype: 'f32',
      signal: controller.signal,
      onProgress: (p) => {
        if (p.tensor === 'model.layers.0.mlp.up_proj.weight') controller.abort();
      },
    });
    await expect(pending).rejects.toBeInstanceOf(QkAbortError);
  });
});

const TOKENIZER_DIR = fileURLToPath(new URL('../tokenizer/', import.meta.url));

describe('writeRandomCheckpoint + describeCheckpoint', () => {
  it('writes a transformers-style tiny checkpoint that loads back bit for bit', async () => {
    const dir = fresh('tiny');
    const summary = await writeRandomCheckpoint(dir, PRESETS.tiny, { seed: 42 });
    expect((await readdir(dir)).sort()).toEqual(
      [
        'config.json',
        'generation_config.json',
        'model.safetensors',
        'tokenizer.json',
        'tokenizer_config.json',
      ].sort(),
    );
    expect(summary).toMatchObject({
      shards: 1,
      tokenizer: true,
      dtype: 'bf16',
      parameters: parameterCount(PRESETS.tiny),
    });
    expect(summary.tensorBytes).toBe(2 * parameterCount(PRESETS.tiny));
    expect(summary.notes).toEqual([]);
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    expect(parseQwen3Config(config)).toEqual(PRESETS.tiny);
    expect(JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8'))).toEqual({
      bos_token_id: 151643,
      do_sample: true,
      eos_token_id: [151645, 151643],
      pad_token_id: 151643,
      temperature: 0.6,
      top_k: 20,
      top_p: 0.95,
    });
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
      expect((await readFile(join(dir, f))).equals(await readFile(join(TOKENIZER_DIR, f))), f).toBe(true);
    }
    const weights = await loadWeights(dir, PRESETS.tiny, { dtype: 'bf16' });
    const loaded = byName(weights, PRESETS.tiny);
    for (const t of randomTensors(PRESETS.tiny, { seed: 42, dtype: 'bf16' })) {
      const got = loaded.get(t.name)!;
      const bytes = new Uint8Array(got.data.buffer, got.data.byteOffset, got.data.byteLength);
      expect(firstDifference(bytes, t.bytes), t.name).toBe(-1);
    }
    expect(weights.lmHead).toBe(weights.embed);
    disposeWeights(weights);

    const d = await describeCheckpoint(dir);
    expect(d).toMatchObject({
      config: PRESETS.tiny,
      parameters: parameterCount(PRESETS.tiny),
      dtypes: { BF16: 46 },
      tensors: 46,
      problems: [],
    });
    expect(d.files.map((f) => f.name)).toEqual(['model.safetensors']);
    expect(d.bytes).toBeGreaterThan(summary.tensorBytes);
  });

  it('shards above maxShardBytes, refuses a non-empty directory, and replaces stale files with overwrite', async () => {
    const dir = fresh('sharded');
    const summary = await writeRandomCheckpoint(dir, MICRO, {
      seed: 5,
      maxShardBytes: 2000,
      tokenizerDir: false,
    });
    expect(summary.shards).toBeGreaterThan(3);
    const files = await readdir(dir);
    expect(files).toContain('model.safetensors.index.json');
    expect(files).toContain(`model-00001-of-${String(summary.shards).padStart(5, '0')}.safetensors`);
    const weights = await loadWeights(dir, MICRO, { dtype: 'f32' });
    const loaded = byName(weights, MICRO);
    for (const t of randomTensors(MICRO, { seed: 5, dtype: 'f32' })) {
      expect(firstDifference(new Uint8Array(loaded.get(t.name)!.data.buffer), t.bytes), t.name).toBe(-1);
    }
    disposeWeights(weights);
    const d = await describeCheckpoint(dir);
    expect(d.files.map((f) => f.name)).toContain('model.safetensors.index.json');
    expect(d.files).toHaveLength(summary.shards + 1);

    await expect(writeRandomCheckpoint(dir, MICRO, { tokenizerDir: false })).rejects.toThrow(
      /is not empty.*--force/,
    );
    await writeFile(join(dir, 'notes.txt'), 'keep me');
    await writeRandomCheckpoint(dir, MICRO, { overwrite: true, tokenizerDir: false });
    expect((await readdir(dir)).sort()).toEqual([
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'notes.txt',
    ]);
  });

  it('writes no tokenizer when the files cannot be found, and says so', async () => {
    const empty = fresh('no-tokenizer-source');
    await mkdir(empty);
    const summary = await writeRandomCheckpoint(fresh('no-tok'), MICRO, { tokenizerDir: empty });
    expect(summary.tokenizer).toBe(false);
    expect(summary.notes.join(' ')).toMatch(/tokenizer\.json was not copied/);
  });

  it('describeCheckpoint lists the problems of a checkpoint that does not match its config', async () => {
    const dir = await writeMicro(microTensors(2).filter((t) => t.name !== 'model.norm.weight'));
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({
        model_type: 'qwen3',
        hidden_size: 16,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        head_dim: 8,
        intermediate_size: 24,
        vocab_size: 96,
      }),
    );
    const d = await describeCheckpoint(dir);
    expect(d.problems).toEqual(['1 tensor missing: model.norm.weight']);
    expect(d.dtypes).toEqual({ F32: 9, F16: 8, BF16: 7 });
    await expect(describeCheckpoint(fresh('none'))).rejects.toThrow(/has no config\.json/);
  });
});
