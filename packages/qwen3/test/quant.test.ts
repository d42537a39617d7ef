/**
 * Weight-only quantization of the decoder projections: the cpu engine runs them through the @qk/ops references,
 * loadQwen3 quantizes at load, and the quality against the float model is measured on the tiny preset.
 */
import { cudaAvailable, dequantizeInt4, dequantizeInt8, QkValueError, Tensor } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { randomWeights } from '../src/checkpoint/index.js';
import { PRESETS } from '../src/config.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { loadQwen3 } from '../src/model.js';
import {
  compareLogits,
  disposeQuantizedLayers,
  LINEAR_KEYS,
  linearErrors,
  QkQuantizationError,
  quantizeLinear,
  quantizeLinears,
} from '../src/quant/index.js';
import type { LayerWeights, Qwen3Weights } from '../src/types.js';

const tiny = PRESETS.tiny;
const weightsOf = (seed: number) => randomWeights(tiny, { dtype: 'f32', seed });

/** Deterministic ids below the tokenizer's vocabulary. */
function ids(count: number, seed: number): number[] {
  let a = seed;
  return Array.from({ length: count }, () => {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0;
    return a % 150_000;
  });
}

/** The float weights with every projection replaced by the dequantization of its quantized form. */
function dequantized(weights: Qwen3Weights<'f32'>, bits: 8 | 4): Qwen3Weights<'f32'> {
  const q = quantizeLinears(weights, { bits });
  const layers = weights.layers.map((l, i) => {
    const out: Record<string, Tensor<'f32'>> = { ...l };
    for (const key of LINEAR_KEYS) {
      const ql = q[i]![key];
      out[key] = ql.bits === 8 ? dequantizeInt8(ql.weight) : dequantizeInt4(ql.weight);
      l[key].dispose();
    }
    return out as unknown as LayerWeights<'f32'>;
  });
  disposeQuantizedLayers(q);
  return { ...weights, layers };
}

describe('quantized cpu engine', () => {
  for (const bits of [8, 4] as const) {
    it(`int${bits}: logits equal a float model built from the dequantized weights`, async () => {
      const base = await weightsOf(3);
      const quantized = quantizeLinears(base, { bits });
      const engine = createCpuEngine(tiny, base, { maxContext: 16, quantized });
      const reference = createCpuEngine(tiny, dequantized(await weightsOf(3), bits), { maxContext: 16 });
      const prompt = ids(5, 7);
      const a = engine.logits(prompt, 0);
      const b = reference.logits(prompt, 0);
      let maxDiff = 0;
      let maxAbs = 0;
      for (let i = 0; i < a.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(a[i]! - b[i]!));
        maxAbs = Math.max(maxAbs, Math.abs(b[i]!));
      }
      expect(maxDiff).toBeLessThan(1e-4 * Math.max(1, maxAbs));
      // Decode through the cache agrees too.
      expect(engine.logits([prompt[0]!], 5)[0]).toBeCloseTo(reference.logits([prompt[0]!], 5)[0]!, 4);
      engine.dispose();
      reference.dispose();
      // Disposal freed the quantized tensors.
      expect(quantized[0]!.q.weight.scales.disposed).toBe(true);
    });
  }

  it('refuses a quantized layer count that does not match the config', async () => {
    const base = await weightsOf(1);
    const quantized = quantizeLinears(base, { bits: 8 });
    expect(() => createCpuEngine(tiny, base, { maxContext: 8, quantized: quantized.slice(1) })).toThrow(
      QkValueError,
    );
    disposeQuantizedLayers(quantized);
  });
});

describe('quantizeLinear', () => {
  it('names the tensor when a weight holds a non-finite value', () => {
    const data = new Float32Array(4 * 128).fill(0.5);
    data[130] = Number.NaN;
    const w = Tensor.fromStorage(data, [4, 128], 'f32');
    for (const bits of [8, 4] as const) {
      const e = (() => {
        try {
          quantizeLinear('model.layers.0.mlp.up_proj.weight', w, bits);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(e).toBeInstanceOf(QkQuantizationError);
      expect((e as QkQuantizationError).tensor).toBe('model.layers.0.mlp.up_proj.weight');
      expect((e as Error).message).toContain('up_proj');
    }
  });

  it('gives finite scales for large finite weights (int4, group 64)', () => {
    const data = new Float32Array(2 * 128).fill(1);
    data[0] = 3.4e38;
    data[1] = -3.4e38;
    const w = Tensor.fromStorage(data, [2, 128], 'f32');
    const q = quantizeLinear('w', w, 4, 64);
    expect(q.bits).toBe(4);
    expect(Array.from(q.weight.scales.data).every(Number.isFinite)).toBe(true);
  });
});

describe('loadQwen3 weights option', () => {
  it('quantizes at load on the cpu engine and generates', async () => {
    for (const weights of ['int8', 'int4'] as const) {
      const model = await loadQwen3('tiny', { weights, engine: 'cpu', maxContext: 32 });
      expect(model.engine).toBe('cpu');
      // The bytes held: per [out, in] projection, int8 codes and an f32 scale per row; int4 codes two per byte and
      // an f32 scale per row and group of 128.
      const { hiddenSize: h, numHeads, numKvHeads, headDim: d, intermediateSize: ffn, numLayers } = tiny;
      const shapes = [
        [numHeads * d, h],
        [numKvHeads * d, h],
        [numKvHeads * d, h],
        [h, numHeads * d],
        [ffn, h],
        [ffn, h],
        [h, ffn],
      ] as const;
      const bytes = shapes.reduce(
        (sum, [out, n]) =>
          sum + (weights === 'int8' ? out * n + 4 * out : (out * n) / 2 + (4 * out * n) / 128),
        0,
      );
      expect(model.weightInfo).toMatchObject({ format: weights, projectionBytes: numLayers * bytes });
      const result = await model.generate('hello', { maxTokens: 4, temperature: 0 }).result;
      expect(result.ids.length).toBeGreaterThan(0);
      model.dispose();
    }
  });

  it('refuses the megakernel for a shape it does not serve (pointing to the layered engine), and an unknown format', async () => {
    // (Without a GPU the GPU check speaks first.)
    await expect(loadQwen3('tiny', { weights: 'int8', engine: 'megakernel' })).rejects.toThrow(
      cudaAvailable() ? /use "layered"/ : /needs a GPU/,
    );
    await expect(loadQwen3('tiny', { weights: 'int3' as never })).rejects.toThrow(QkValueError);
  });
});

/**
 * Quality of int8/int4 against the bf16 model (the cpu engine computes in float32 over bf16-rounded weights), with
 * the f32-vs-bf16 gap on the same draw as the yardstick. Random weights at HF's init std give nearly flat logits over
 * 151,936 tokens, so the top two logits are often a near-tie and top-1 flips on tiny perturbations: KL is the
 * meaningful number here, top-1 is reported next to the bf16-rounding baseline.
 */
async function agreement(candidate: 'f32' | 8 | 4, steps: number) {
  const base = await randomWeights(tiny, { dtype: candidate === 'f32' ? 'f32' : 'bf16', seed: 11 });
  const quantized = candidate === 'f32' ? undefined : quantizeLinears(base, { bits: candidate });
  const errors = quantized === undefined ? [] : linearErrors(base, quantized);
  const engine = createCpuEngine(tiny, base, {
    maxContext: steps,
    ...(quantized === undefined ? {} : { quantized }),
  });
  const reference = createCpuEngine(tiny, await randomWeights(tiny, { dtype: 'bf16', seed: 11 }), {
    maxContext: steps,
  });
  const result = compareLogits(reference, engine, ids(steps, 5));
  engine.dispose();
  reference.dispose();
  const worst = errors.length === 0 ? 0 : Math.max(...errors.map((e) => e.relError));
  const mean = errors.length === 0 ? 0 : errors.reduce((s, e) => s + e.relError, 0) / errors.length;
  const label = candidate === 'f32' ? 'f32 ' : `int${candidate}`;
  console.log(
    `${label} vs bf16, tiny, ${result.steps} teacher-forced steps: projection rel. error mean ${mean.toExponential(2)} ` +
      `max ${worst.toExponential(2)}; KL mean ${result.klMean.toExponential(2)} max ${result.klMax.toExponential(2)} nats; ` +
      `top-1 ${(result.top1 * 100).toFixed(1)}%`,
  );
  return { errors, worst, mean, ...result };
}

describe('quantization quality on the tiny preset (teacher-forced, against bf16)', () => {
  const STEPS = 64;
  it('int8: per-projection error < 1%, KL < 1e-4 nats, top-1 ≥ 90%', async () => {
    const q = await agreement(8, STEPS);
    expect(q.errors).toHaveLength(tiny.numLayers * LINEAR_KEYS.length);
    expect(q.worst).toBeLessThan(0.01);
    expect(q.klMean).toBeLessThan(1e-4);
    expect(q.top1).toBeGreaterThanOrEqual(0.9);
  });

  it('int4 (group 128): per-projection error < 15%, KL < 1e-2 nats', async () => {
    const q = await agreement(4, STEPS);
    expect(q.worst).toBeLessThan(0.15);
    expect(q.klMean).toBeLessThan(1e-2);
    expect(q.top1).toBeGreaterThan(0.3);
  });

  it('baseline: f32 against bf16 on the same draw', async () => {
    const q = await agreement('f32', STEPS);
    expect(q.klMean).toBeLessThan(1e-4);
  });
});
