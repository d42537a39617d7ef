/**
 * The layered engine's projections (engine/projections.ts) on the CPU, where every op runs its reference: fused
 * quantized weights and their views against the cpu engine's `quantLinear` per projection (INT8, INT4, INT4 with
 * AWQ/GPTQ zero points), the quantized decode-step pieces (`normProject`, `projectSwiglu`) against the float fused op
 * over the dequantized weight, the byte count, and the engine table's answer for quantized weights.
 */
import {
  cudaAvailable,
  dequantizeInt4,
  dequantizeInt8,
  type FloatDType,
  QkValueError,
  swiglu,
  Tensor,
} from '@qk/ops';
import { closeness } from '@qk/ops/testing';
import { describe, expect, it } from 'vitest';
import { PRESETS } from '../src/config.js';
import { engineBytes } from '../src/engine/common.js';
import {
  checkEngineAvailable,
  defaultEngine,
  ENGINE_NAMES,
  ENGINE_WEIGHT_FORMATS,
} from '../src/engine/index.js';
import {
  buildLayerProjections,
  checkFusable,
  type LayerProjections,
  normProject,
  type ProjectionTarget,
  project,
  projectSwiglu,
  weightInfo,
} from '../src/engine/projections.js';
import {
  LINEAR_KEYS,
  type LinearKey,
  type QuantizedLayer,
  type QuantizedLinear,
  quantizeLinear,
  quantLinear,
} from '../src/quant/quantize.js';

/** Odd sizes: hidden 96, q 4 heads of 16 (64 rows), k and v 16 rows each, FFN 160. */
const HIDDEN = 96;
const FFN = 160;
const ROWS: Record<LinearKey, [number, number]> = {
  q: [64, HIDDEN],
  k: [16, HIDDEN],
  v: [16, HIDDEN],
  o: [HIDDEN, 64],
  gate: [FFN, HIDDEN],
  up: [FFN, HIDDEN],
  down: [HIDDEN, FFN],
};

type Format = { bits: 8 } | { bits: 4; group: number; zeroPoints: boolean };

/** A random quantized layer of {@link ROWS} (zero points: random per-group offsets, as AWQ/GPTQ repacking gives). */
function quantizedLayer(format: Format, seed: number): QuantizedLayer {
  const layer = {} as Record<LinearKey, QuantizedLinear>;
  LINEAR_KEYS.forEach((key, i) => {
    const [out, n] = ROWS[key];
    const w = Tensor.randn([out, n], { seed: seed * 10 + i, std: 1 / Math.sqrt(n) });
    const q = quantizeLinear(key, w, format.bits, format.bits === 4 ? format.group : undefined);
    w.dispose();
    if (format.bits === 4 && format.zeroPoints && q.bits === 4) {
      const offsets = Tensor.randn([out, n / format.group], { seed: seed * 10 + i + 100, std: 0.02 });
      layer[key] = { ...q, offsets };
    } else layer[key] = q;
  });
  return layer;
}

/** A copy of `layer` (fresh tensors): buildLayerProjections takes what it is given apart. */
function copyOf(layer: QuantizedLayer): QuantizedLayer {
  const out = {} as Record<LinearKey, QuantizedLinear>;
  for (const key of LINEAR_KEYS) {
    const q = layer[key];
    out[key] =
      q.bits === 8
        ? { bits: 8, weight: { qweight: q.weight.qweight.clone(), scales: q.weight.scales.clone() } }
        : {
            bits: 4,
            weight: { ...q.weight, qweight: q.weight.qweight.clone(), scales: q.weight.scales.clone() },
            ...(q.offsets === undefined ? {} : { offsets: q.offsets.clone() }),
          };
  }
  return out;
}

/** The float `[out, in]` weight a quantized projection stands for (offsets included), in f32. */
function dequantized(q: QuantizedLinear): Tensor<'f32'> {
  if (q.bits === 8) return dequantizeInt8(q.weight);
  const w = dequantizeInt4(q.weight);
  if (q.offsets === undefined) return w;
  const [out, n] = w.shape as [number, number];
  const groups = n / q.weight.groupSize;
  const data = w.data;
  for (let o = 0; o < out; o++)
    for (let k = 0; k < n; k++)
      data[o * n + k]! += q.offsets.data[o * groups + Math.floor(k / q.weight.groupSize)]!;
  return w;
}

const target = (dtype: FloatDType): ProjectionTarget => ({ device: 'cpu', dtype, shared: new Map() });

/** Rows side by side: `[rows, a] ‖ [rows, b] ‖ …` → `[rows, a + b + …]`. */
function concatColumns(parts: readonly Tensor<'f32'>[]): Float32Array {
  const rows = parts[0]!.shape[0]!;
  const width = parts.reduce((s, p) => s + p.shape[1]!, 0);
  const out = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) {
    let at = r * width;
    for (const p of parts) {
      const w = p.shape[1]!;
      out.set(p.data.subarray(r * w, (r + 1) * w), at);
      at += w;
    }
  }
  return out;
}

const FORMATS: [string, Format][] = [
  ['int8', { bits: 8 }],
  ['int4 group 32', { bits: 4, group: 32, zeroPoints: false }],
  ['int4 group 32 with zero points', { bits: 4, group: 32, zeroPoints: true }],
];

describe('quantized projections of the layered engine (CPU references)', () => {
  for (const [name, format] of FORMATS) {
    it(`${name}: fused q|k|v and gate|up and their views equal quantLinear per projection (1 and 5 rows)`, () => {
      const reference = quantizedLayer(format, 3);
      const p = buildLayerProjections({}, copyOf(reference), target('f32'));
      for (const rows of [1, 5]) {
        const x = Tensor.randn([rows, HIDDEN], { seed: 40 + rows });
        const want = (key: LinearKey) => quantLinear(x, reference[key]);
        const fused = concatColumns(['q', 'k', 'v'].map((k) => want(k as LinearKey)));
        const got = project(x, p.qkv);
        expect(closeness(got, Tensor.fromStorage(fused, got.shape, 'f32')).relL2).toBeLessThan(1e-6);
        for (const key of ['q', 'k', 'v', 'gate', 'up'] as const) {
          expect(closeness(project(x, p[key]), want(key)).relL2, key).toBeLessThan(1e-6);
        }
        const h = Tensor.randn([rows, FFN], { seed: 50 + rows });
        expect(closeness(project(h, p.down), quantLinear(h, reference.down)).relL2).toBeLessThan(1e-6);
        const mlp = projectSwiglu(x, p.gateUp);
        expect(closeness(mlp, swiglu(want('gate'), want('up'))).relL2).toBeLessThan(1e-6);
      }
    });

    it(`${name}: the quantized decode step's norm + projection (+ SwiGLU) equals the fused float op on the dequantized weight`, () => {
      const reference = quantizedLayer(format, 5);
      const quant = buildLayerProjections({}, copyOf(reference), target('f32'));
      const float = {
        gateUp: Tensor.fromStorage(
          new Float32Array([...dequantized(reference.gate).data, ...dequantized(reference.up).data]),
          [2 * FFN, HIDDEN],
          'f32',
        ),
        qkv: Tensor.fromStorage(
          new Float32Array(['q', 'k', 'v'].flatMap((k) => [...dequantized(reference[k as LinearKey]).data])),
          [96, HIDDEN],
          'f32',
        ),
      };
      const x = Tensor.randn([1, HIDDEN], { seed: 7 });
      const residual = Tensor.randn([1, HIDDEN], { seed: 8 });
      const norm = Tensor.randn([HIDDEN], { seed: 9, mean: 1, std: 0.3 });
      for (const [glu, key] of [
        [false, 'qkv'],
        [true, 'gateUp'],
      ] as const) {
        const width = glu ? FFN : 96;
        const run = (w: Parameters<typeof project>[1]) => {
          // Poisoned outputs: every element must be written.
          const out = Tensor.fromStorage(new Float32Array(width).fill(Number.NaN), [1, width], 'f32');
          const residualOut = Tensor.fromStorage(
            new Float32Array(HIDDEN).fill(Number.NaN),
            [1, HIDDEN],
            'f32',
          );
          const normed = Tensor.empty([1, HIDDEN], 'f32');
          normProject(x, norm, w, { eps: 1e-6, residual, residualOut, glu, out, normed });
          return { out, residualOut };
        };
        const got = run(quant[key]);
        const want = run(float[key]);
        expect(got.out.toArray().every(Number.isFinite)).toBe(true);
        expect(closeness(got.out, want.out).relL2, key).toBeLessThan(1e-5);
        expect(got.residualOut.toArray()).toEqual(
          Array.from(x.data, (v, i) => Math.fround(v + residual.data[i]!)),
        );
        expect(want.residualOut.toArray()).toEqual(got.residualOut.toArray());
        // Without a residual: the plain RMSNorm in front.
        const plain = Tensor.empty([1, width], 'f32');
        normProject(x, norm, quant[key], {
          eps: 1e-6,
          glu,
          out: plain,
          normed: Tensor.empty([1, HIDDEN], 'f32'),
        });
        const wantPlain = Tensor.empty([1, width], 'f32');
        normProject(x, norm, float[key], {
          eps: 1e-6,
          glu,
          out: wantPlain,
          normed: Tensor.empty([1, HIDDEN], 'f32'),
        });
        expect(closeness(plain, wantPlain).relL2).toBeLessThan(1e-5);
      }
    });
  }

  it('zero points in bf16 activations: within bf16 rounding of the f32 reference', () => {
    const reference = quantizedLayer({ bits: 4, group: 32, zeroPoints: true }, 11);
    const p = buildLayerProjections({}, copyOf(reference), target('bf16'));
    const x = Tensor.randn([3, HIDDEN], { seed: 12 });
    const got = project(x.to('bf16'), p.gateUp).to('f32');
    const want = concatColumns([quantLinear(x, reference.gate), quantLinear(x, reference.up)]);
    expect(closeness(got, Tensor.fromStorage(want, got.shape, 'f32')).relL2).toBeLessThan(1e-2);
  });

  it('refuses q, k, v (or gate, up) in different formats before copying anything', () => {
    const a = quantizedLayer({ bits: 8 }, 1);
    const b = quantizedLayer({ bits: 4, group: 32, zeroPoints: false }, 1);
    expect(() => checkFusable([{ ...a, k: b.k }])).toThrow(/stacks q, k, v into one weight/);
    expect(() =>
      checkFusable([{ ...b, up: quantizedLayer({ bits: 4, group: 48, zeroPoints: false }, 2).up }]),
    ).toThrow(QkValueError);
    expect(() => checkFusable([a, b])).not.toThrow();
  });

  it('counts the bytes it holds: codes, f32 scales and offsets of each projection, the group sums once', () => {
    const group = 32;
    const shared = target('f32'); // one engine: its layers share the group-sum matrices
    const layers: LayerProjections[] = [1, 2].map((seed) =>
      buildLayerProjections({}, quantizedLayer({ bits: 4, group, zeroPoints: true }, seed), shared),
    );
    const norm = Tensor.randn([HIDDEN], { seed: 1 });
    const info = weightInfo(layers, [norm, norm]);
    // Per projection [out, in]: in/2 bytes of codes per row, 4 bytes of scale and 4 of offset per row and group.
    const perLayer = LINEAR_KEYS.reduce((s, k) => {
      const [out, n] = ROWS[k];
      return s + (out * n) / 2 + 2 * 4 * out * (n / group);
    }, 0);
    // One 0/1 f32 matrix [in/group, in] per input width (96, 64 and 160).
    const sums = [HIDDEN, 64, FFN].reduce((s, n) => s + (n / group) * n * 4, 0);
    expect(info).toEqual({ format: 'int4', projectionBytes: 2 * perLayer + sums, otherBytes: HIDDEN * 4 });
    const int8 = weightInfo([buildLayerProjections({}, quantizedLayer({ bits: 8 }, 3), target('f32'))], []);
    const int8Bytes = LINEAR_KEYS.reduce((s, k) => s + ROWS[k][0] * ROWS[k][1] + 4 * ROWS[k][0], 0);
    expect(int8).toEqual({ format: 'int8', projectionBytes: int8Bytes, otherBytes: 0 });
  });
});

describe('engines and quantized weights', () => {
  it('sizes a quantized model by its projections at their bytes per weight, the rest in the float dtype', () => {
    const c = PRESETS['0.6b'];
    // 28 layers × (q 2048·1024 + k, v 2 × 1024·1024 + o 1024·2048 + gate, up, down 3 × 3072·1024).
    const projections = 28 * 15_728_640;
    expect(engineBytes(c, 100, 2, 2) - engineBytes(c, 100, 2, 2, 0.5)).toBe(projections * 1.5);
  });

  it('every engine runs every weight format; without a config the default for int8/int4 is not the megakernel', () => {
    for (const name of ENGINE_NAMES) expect(ENGINE_WEIGHT_FORMATS[name]).toEqual(['bf16', 'int8', 'int4']);
    for (const weights of ['int8', 'int4'] as const) {
      expect(defaultEngine(undefined, weights)).not.toBe('megakernel');
      if (!cudaAvailable()) {
        expect(() => checkEngineAvailable('megakernel', 'test', { weights })).toThrow(/needs a GPU/);
      }
    }
  });
});
