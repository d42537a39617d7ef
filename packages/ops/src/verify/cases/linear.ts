/**
 * Verify cases of the linear family: linear (GEMV for M ≤ 8, tensor-core / SIMT GEMM above), the quantizers
 * (compared exactly) and the weight-only int8 / int4 linears; fused-linear.ts reuses its inputs and layer shapes.
 *
 * Weights are uniform with variance 1/K (as a trained layer's are), x is standard normal, so outputs stay O(1)
 * for every K and the absolute tolerance measures accumulation error rather than bf16's spacing at large values.
 * The CPU reference runs at well under 1 GFLOP/s, so each case keeps M·N·K near or below 5e8, weights come from a
 * fast xorshift stream (the 8B lm_head has 6.2e8 of them), and bf16 runs the whole sweep while f16 and f32, which
 * share every kernel template with it, skip the heaviest multi-row Qwen3-8B cases.
 */

import type { Activation } from '../../core/activation.js';
import type { Int4Weight, Int8Weight } from '../../core/quant-weight.js';
import { launch } from '../../cuda/common.js';
import type { FloatDType } from '../../dtype.js';
import { fromFloats } from '../../io.js';
import { linear } from '../../ops/linear.js';
import { linearInt4, linearInt8, quantizeInt4, quantizeInt8 } from '../../ops/quant.js';
import { deviceAddress, Tensor } from '../../tensor.js';
import { closeness } from '../../testing/assert-close.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { ODD_WIDTHS, QWEN3_SHAPES, type QwenShape, VERIFY_DTYPES } from './shapes.js';

type Tag = VerifyCase['tag'];

export interface Dims {
  m: number;
  k: number;
  n: number;
}

/** One decode-layer projection: its name and `[N = out, K = in]`. */
export interface Layer {
  name: string;
  k: number;
  n: number;
}

export function layers(s: QwenShape): { qkv: Layer[]; o: Layer; gateUp: Layer; down: Layer; lmHead: Layer } {
  const q = s.heads * s.headDim;
  const kv = s.kvHeads * s.headDim;
  return {
    qkv: [
      { name: 'q', k: s.hidden, n: q },
      { name: 'k/v', k: s.hidden, n: kv },
    ],
    o: { name: 'o', k: q, n: s.hidden },
    gateUp: { name: 'gate/up', k: s.hidden, n: s.ffn },
    down: { name: 'down', k: s.ffn, n: s.hidden },
    lmHead: { name: 'lm_head', k: s.hidden, n: s.vocab },
  };
}

export function describe(d: Dims, extra = ''): string {
  return `M=${d.m} K=${d.k} N=${d.n}${extra}`;
}

/** x: standard normal `[M, K]`. */
export function input(d: Dims, dtype: FloatDType, seed: number): Tensor<FloatDType> {
  return Tensor.randn([d.m, d.k], { dtype, seed });
}

/** `count` uniform values on [low, high) from a seeded xorshift32 stream: ~1 ns each, for the big weights. */
function uniformValues(count: number, seed: number, low: number, high: number): Float32Array {
  const out = new Float32Array(count);
  let state = Math.imul(seed + 1, 0x9e3779b1) >>> 0 || 1;
  const step = (high - low) / 4294967296;
  for (let i = 0; i < count; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out[i] = low + (state >>> 0) * step;
  }
  return out;
}

/** W: uniform on ±√(3/K) (variance 1/K), `[N, K]`. */
export function weight(n: number, k: number, dtype: FloatDType, seed: number): Tensor<FloatDType> {
  const a = Math.sqrt(3 / Math.max(k, 1));
  return fromFloats(uniformValues(n * k, seed, -a, a), [n, k], dtype);
}

/**
 * Weights for the quantizers: uniform on ±2, with row 0 all zeros (scale 0) and row 1 built from halves so that
 * every w / scale of it is a tie (x.5) that must round to even: each group leads with qmax (scale exactly 1).
 */
function quantWeight(n: number, k: number, dtype: FloatDType, seed: number, group: number, qmax: number) {
  const v = uniformValues(n * k, seed, -2, 2);
  if (n >= 2) {
    v.fill(0, 0, k);
    for (let j = 0; j < k; j++) {
      const span = 2 * qmax - 2; // halves in (−qmax + 1, qmax − 1)
      v[k + j] = j % group === 0 ? qmax : (j % span) - (qmax - 1) + 0.5;
    }
  }
  return fromFloats(v, [n, k], dtype);
}

function biasFor(n: number, dtype: FloatDType, seed: number): Tensor<FloatDType> {
  return Tensor.rand([n], { dtype, seed, low: -0.5, high: 0.5 });
}

function linearCase(
  dtype: FloatDType,
  d: Dims,
  tag: Tag,
  opts: { activation?: Activation; bias?: boolean; label?: string } = {},
): VerifyCase {
  const activation = opts.activation ?? 'none';
  const extra = `${opts.label ? ` ${opts.label}` : ''}${opts.bias ? ' +bias' : ''}${activation === 'none' ? '' : ` ${activation}`}`;
  return {
    op: 'linear',
    dtype,
    shape: describe(d, extra),
    tag,
    tolerance: toleranceFor('linear', dtype),
    make(seed) {
      const x = input(d, dtype, seed);
      const w = weight(d.n, d.k, dtype, seed + 1);
      const b = opts.bias ? biasFor(d.n, dtype, seed + 2) : undefined;
      return {
        inputs: b === undefined ? [x, w] : [x, w, b],
        expected: [linear(x, w, { bias: b, activation })],
        run: ([gx, gw, gb], [out]) =>
          void linear(gx as Tensor<FloatDType>, gw as Tensor<FloatDType>, {
            bias: gb as Tensor<FloatDType> | undefined,
            activation,
            out,
          }),
      };
    },
  };
}

/** Copies a CUDA result into the runner's poisoned output (the quantizers allocate their own outputs). */
function copyInto(dst: Tensor, src: Tensor): void {
  launch('verify', (b) => b.copyDeviceToDevice(deviceAddress(dst), deviceAddress(src), src.nbytes));
}

/** Codes and scales must equal the reference bit for bit; the note says where the first difference is. */
function exactly(
  actual: Tensor[],
  expected: Tensor[],
): { relL2: number; maxAbs: number; pass: boolean; note?: string } {
  let relL2 = 0;
  let maxAbs = 0;
  const notes: string[] = [];
  actual.forEach((a, i) => {
    const e = expected[i]!;
    const m = closeness(a, e);
    relL2 = Math.max(relL2, m.relL2);
    maxAbs = Math.max(maxAbs, m.maxAbs);
    const got = new Uint8Array(a.data.buffer, a.data.byteOffset, a.nbytes);
    const want = new Uint8Array(e.data.buffer, e.data.byteOffset, e.nbytes);
    let diffs = 0;
    let first = -1;
    for (let j = 0; j < want.length; j++) {
      if (got[j] !== want[j]) {
        diffs++;
        if (first < 0) first = j;
      }
    }
    if (diffs > 0) {
      const at = Math.floor(first / (e.nbytes / e.size));
      notes.push(
        `${i === 0 ? 'qweight' : 'scales'}: ${diffs} bytes differ, first element ${at}: got ${a.toArray()[at]}, expected ${e.toArray()[at]}`,
      );
    }
  });
  return { relL2, maxAbs, pass: notes.length === 0, ...(notes.length ? { note: notes.join('; ') } : {}) };
}

function quantizeCase(dtype: FloatDType, n: number, k: number, tag: Tag, groupSize?: number): VerifyCase {
  const int4 = groupSize !== undefined;
  const op = int4 ? 'quantizeInt4' : 'quantizeInt8';
  return {
    op,
    dtype,
    shape: `N=${n} K=${k}${int4 ? ` group=${groupSize}` : ''}`,
    tag,
    tolerance: toleranceFor(op, dtype),
    make(seed) {
      const w = quantWeight(n, k, dtype, seed, int4 ? (groupSize as number) : k, int4 ? 7 : 127);
      const ref = int4 ? quantizeInt4(w, { groupSize }) : quantizeInt8(w);
      return {
        inputs: [w],
        expected: [ref.qweight, ref.scales],
        run: ([gw], [q, s]) => {
          const got = int4
            ? quantizeInt4(gw as Tensor<FloatDType>, { groupSize })
            : quantizeInt8(gw as Tensor<FloatDType>);
          try {
            copyInto(q!, got.qweight);
            copyInto(s!, got.scales);
          } finally {
            got.qweight.dispose();
            got.scales.dispose();
          }
        },
        compare: exactly,
      };
    },
  };
}

function quantLinearCase(
  dtype: FloatDType,
  d: Dims,
  tag: Tag,
  opts: { groupSize?: number; bias?: boolean; label?: string } = {},
): VerifyCase {
  const int4 = opts.groupSize !== undefined;
  const op = int4 ? 'linearInt4' : 'linearInt8';
  const extra = `${int4 ? ` group=${opts.groupSize}` : ''}${opts.label ? ` ${opts.label}` : ''}${opts.bias ? ' +bias' : ''}`;
  return {
    op,
    dtype,
    shape: describe(d, extra),
    tag,
    tolerance: toleranceFor(op, dtype),
    make(seed) {
      const x = input(d, dtype, seed);
      const w = weight(d.n, d.k, dtype, seed + 1);
      const b = opts.bias ? biasFor(d.n, dtype, seed + 2) : undefined;
      const qw = int4 ? quantizeInt4(w, { groupSize: opts.groupSize }) : quantizeInt8(w);
      const expected = int4
        ? linearInt4(x, qw as Int4Weight, { bias: b })
        : linearInt8(x, qw as Int8Weight, { bias: b });
      const inputs: Tensor[] = [x, qw.qweight, qw.scales];
      if (b !== undefined) inputs.push(b);
      return {
        inputs,
        expected: [expected],
        run: ([gx, gq, gs, gb], [out]) => {
          const fx = gx as Tensor<FloatDType>;
          const fb = gb as Tensor<FloatDType> | undefined;
          if (int4) {
            const gw: Int4Weight = {
              qweight: gq as Tensor<'u8'>,
              scales: gs as Tensor<'f32'>,
              groupSize: opts.groupSize as number,
            };
            linearInt4(fx, gw, { bias: fb, out });
          } else {
            linearInt8(fx, { qweight: gq as Tensor<'i8'>, scales: gs as Tensor<'f32'> }, { bias: fb, out });
          }
        },
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// The sweep. bf16 runs all of it; f16 and f32 (the same kernel templates on another element type) skip the
// multi-row cases of the big Qwen3-8B projections and the largest vocab projections, whose CPU reference alone
// takes tens of seconds (f16 decoding is the slowest).
// ---------------------------------------------------------------------------------------------------------

const ACTIVATIONS: readonly Activation[] = ['silu', 'gelu', 'gelu_tanh'];

/** Whether `dtype`'s sweep takes this layer beyond M = 1: always for bf16, else below 5e7 weights. */
export function multiRow(dtype: FloatDType, layer: Layer): boolean {
  return dtype === 'bf16' || layer.n * layer.k < 5e7;
}

function linearCases(dtype: FloatDType): VerifyCase[] {
  const cases: VerifyCase[] = [];
  // Odd K and N: every combination at M = 1 (scalar GEMV when K is not a whole number of 16-byte vectors).
  for (const k of ODD_WIDTHS)
    for (const n of ODD_WIDTHS) cases.push(linearCase(dtype, { m: 1, k, n }, 'odd'));
  // Small M on the GEMV kernels (row chunks of 4 and 8), and the GEMM above the GEMV range.
  for (const [k, n] of [
    [7, 111],
    [989, 7],
    [111, 989],
    [4097, 111],
    [1, 4097],
  ] as const) {
    for (const m of [3, 8, 33]) cases.push(linearCase(dtype, { m, k, n }, 'odd'));
  }
  // Whole vectors but partial batches, split-K remainders, odd N on the vector path; GEMM edges at M = 9, 129.
  for (const m of [1, 2, 5, 9, 129]) {
    cases.push(linearCase(dtype, { m, k: 4104, n: 989 }, 'edge'));
    cases.push(linearCase(dtype, { m, k: 2056, n: 13 }, 'edge'));
    cases.push(linearCase(dtype, { m, k: 8, n: 1 }, 'edge'));
  }
  cases.push(
    linearCase(dtype, { m: 1, k: 24584, n: 64 }, 'edge', { label: 'x past the shared-memory stage' }),
  );
  cases.push(linearCase(dtype, { m: 8, k: 8192, n: 96 }, 'edge', { label: 'x read through L1' }));
  cases.push(linearCase(dtype, { m: 3, k: 0, n: 5 }, 'edge', { bias: true, label: 'K=0' }));
  cases.push(linearCase(dtype, { m: 17, k: 0, n: 5 }, 'edge', { bias: true, label: 'K=0' }));
  // Epilogues: bias and each activation on the GEMV (M = 1, 4) and GEMM (M = 70) kernels.
  for (const activation of ACTIVATIONS) {
    for (const m of [1, 4, 70]) {
      cases.push(linearCase(dtype, { m, k: 1024, n: 1024 }, 'edge', { activation, bias: true }));
    }
    cases.push(linearCase(dtype, { m: 5, k: 111, n: 989 }, 'odd', { activation, bias: true }));
    cases.push(linearCase(dtype, { m: 12, k: 1024, n: 1000 }, 'edge', { activation, bias: true }));
  }
  // The small-M tensor-core kernel (K a multiple of 32): row tiles cut short, a last K stage cut short, N not a whole
  // block, a single output column. On Hopper, 17–32 rows take the split-K GEMM instead: the same edges there.
  for (const m of [2, 7, 16, 17, 31, 32]) {
    for (const [k, n] of [
      [4128, 989],
      [1056, 7],
      [96, 4097],
      [32, 1],
    ] as const) {
      cases.push(linearCase(dtype, { m, k, n }, 'edge', { label: 'small-M tensor cores' }));
    }
  }
  cases.push(linearCase(dtype, { m: 1, k: 1024, n: 3072 }, 'edge', { bias: true }));
  cases.push(linearCase(dtype, { m: 96, k: 1024, n: 3072 }, 'edge', { bias: true }));
  // The Hopper GEMM's tile edges (rows, columns and K slices cut short, the smallest M it takes) and each of its
  // epilogues on a persistent grid with more tiles than SMs.
  for (const d of [
    { m: 16, k: 4096, n: 257 },
    { m: 201, k: 1000, n: 2049 },
    { m: 513, k: 8, n: 300 },
    { m: 1999, k: 72, n: 777 },
  ])
    cases.push(linearCase(dtype, d, 'odd'));
  for (const activation of ACTIVATIONS)
    cases.push(linearCase(dtype, { m: 1030, k: 136, n: 1000 }, 'edge', { activation, bias: true }));
  // Split K on the Hopper GEMM (few output tiles, long K): slices cut short by a K tail, two row tiles sharing the
  // tickets, one narrow tile split into many slices; the epilogue runs once, after the last slice's sum.
  for (const [d, activation] of [
    [{ m: 40, k: 3000, n: 300 }, 'silu'],
    [{ m: 130, k: 4104, n: 264 }, 'none'],
    [{ m: 33, k: 12288, n: 64 }, 'gelu_tanh'],
  ] as const) {
    cases.push(linearCase(dtype, d, 'edge', { activation, bias: true, label: 'Hopper split K' }));
  }
  // The Hopper GEMM's swapped form (up to 64 rows: weight rows on wgmma's M, tokens on its N of 16/32/64, outputs
  // stored transposed), from 2 rows on wide projections: token tiles cut short, 128-row weight tiles and K blocks cut
  // short, single and split K, bias per weight row, each activation.
  for (const [d, activation] of [
    [{ m: 2, k: 1000, n: 2049 }, 'none'],
    [{ m: 5, k: 4104, n: 4100 }, 'silu'],
    [{ m: 16, k: 72, n: 2050 }, 'gelu'],
    [{ m: 37, k: 3000, n: 300 }, 'gelu_tanh'],
    [{ m: 63, k: 136, n: 2047 }, 'silu'],
    [{ m: 64, k: 1024, n: 130 }, 'none'],
  ] as const) {
    cases.push(linearCase(dtype, d, 'edge', { activation, bias: true, label: 'Hopper swapped' }));
  }
  // Stream K in the swapped form (tile counts that leave SMs idle, like 49 or 133 on 132 SMs): the tiles' K blocks
  // cut into one run per SM, runs crossing tiles, slices of uneven length, tiles inside one run, a K tail.
  for (const [d, activation] of [
    [{ m: 3, k: 4104, n: 6150 }, 'none'],
    [{ m: 29, k: 4104, n: 6150 }, 'silu'],
    [{ m: 40, k: 2056, n: 17000 }, 'gelu_tanh'],
  ] as const) {
    cases.push(linearCase(dtype, d, 'edge', { activation, bias: true, label: 'Hopper stream K' }));
  }

  // Qwen3 decode layers: every projection at M = 1, small M, and GEMM M where the reference stays cheap.
  for (const s of QWEN3_SHAPES) {
    const l = layers(s);
    const all = [...l.qkv, l.o, l.gateUp, l.down];
    for (const layer of all) cases.push(linearCase(dtype, { m: 1, ...layer }, s.tag, { label: layer.name }));
    if (s.tag === 'qwen3-0.6b' || dtype !== 'f16') {
      cases.push(linearCase(dtype, { m: 1, ...l.lmHead }, s.tag, { label: l.lmHead.name }));
    }
    for (const layer of all) {
      if (multiRow(dtype, layer))
        cases.push(linearCase(dtype, { m: 4, ...layer }, s.tag, { label: layer.name }));
    }
    const kv = l.qkv[1]!;
    if (s.tag === 'qwen3-0.6b') {
      for (const layer of all) {
        for (const m of [8, 64, 128])
          cases.push(linearCase(dtype, { m, ...layer }, s.tag, { label: layer.name }));
      }
      cases.push(linearCase(dtype, { m: 333, ...kv }, s.tag, { label: kv.name }));
    } else {
      cases.push(linearCase(dtype, { m: 8, ...kv }, s.tag, { label: kv.name }));
      cases.push(linearCase(dtype, { m: 64, ...kv }, s.tag, { label: kv.name }));
      if (multiRow(dtype, l.down))
        cases.push(linearCase(dtype, { m: 8, ...l.down }, s.tag, { label: l.down.name }));
    }
  }
  return cases;
}

function quantizeCases(dtype: FloatDType): VerifyCase[] {
  const cases: VerifyCase[] = [];
  for (const [n, k] of [
    [1, 1],
    [7, 111],
    [989, 4097],
    [5, 40000],
  ] as const) {
    cases.push(quantizeCase(dtype, n, k, 'odd'));
  }
  cases.push(quantizeCase(dtype, 5, 6, 'odd', 2));
  cases.push(quantizeCase(dtype, 7, 4128, 'odd', 48));
  cases.push(quantizeCase(dtype, 989, 4096, 'odd', 4096));
  for (const s of QWEN3_SHAPES) {
    const l = layers(s);
    cases.push(quantizeCase(dtype, l.qkv[1]!.n, l.qkv[1]!.k, s.tag));
    cases.push(quantizeCase(dtype, l.o.n, l.o.k, s.tag, 64));
    for (const layer of [l.gateUp, l.down]) {
      if (!multiRow(dtype, layer)) continue;
      cases.push(quantizeCase(dtype, layer.n, layer.k, s.tag));
      cases.push(quantizeCase(dtype, layer.n, layer.k, s.tag, 128));
    }
  }
  return cases;
}

function quantLinearCases(dtype: FloatDType): VerifyCase[] {
  const cases: VerifyCase[] = [];
  for (const m of [1, 3, 9]) {
    // int8: scalar (K % 16 ≠ 0) and vector paths; int4: vector (group % 32 = 0) and scalar groups.
    cases.push(quantLinearCase(dtype, { m, k: 111, n: 7 }, 'odd'));
    cases.push(quantLinearCase(dtype, { m, k: 4097, n: 989 }, 'odd', { bias: true }));
    cases.push(quantLinearCase(dtype, { m, k: 1040, n: 13 }, 'odd'));
    cases.push(quantLinearCase(dtype, { m, k: 96, n: 111 }, 'odd', { groupSize: 32, bias: true }));
    cases.push(quantLinearCase(dtype, { m, k: 4128, n: 989 }, 'odd', { groupSize: 48 }));
    cases.push(quantLinearCase(dtype, { m, k: 6, n: 5 }, 'odd', { groupSize: 2 }));
    cases.push(quantLinearCase(dtype, { m, k: 8192, n: 77 }, 'edge', { groupSize: 128 }));
  }
  // The small-M tensor-core kernel serves quantized W from 2 rows at any M (64-row tiles): int8, and int4 groups of
  // 64 to 1024, with K stages and row tiles cut short.
  for (const m of [2, 17, 64, 65, 200]) {
    const label = 'small-M tensor cores';
    cases.push(quantLinearCase(dtype, { m, k: 4096, n: 989 }, 'edge', { label, bias: true }));
    cases.push(quantLinearCase(dtype, { m, k: 4096, n: 989 }, 'edge', { label, groupSize: 128 }));
    cases.push(quantLinearCase(dtype, { m, k: 1152, n: 111 }, 'edge', { label, groupSize: 64 }));
    cases.push(quantLinearCase(dtype, { m, k: 2048, n: 13 }, 'edge', { label, groupSize: 256 }));
    cases.push(quantLinearCase(dtype, { m, k: 1024, n: 33 }, 'edge', { label, groupSize: 1024 }));
  }
  for (const s of QWEN3_SHAPES) {
    const l = layers(s);
    for (const layer of [...l.qkv, l.o, l.gateUp, l.down]) {
      for (const m of [1, 4]) {
        if (m > 1 && !multiRow(dtype, layer)) continue;
        cases.push(quantLinearCase(dtype, { m, ...layer }, s.tag, { label: layer.name }));
        cases.push(quantLinearCase(dtype, { m, ...layer }, s.tag, { label: layer.name, groupSize: 128 }));
      }
    }
    cases.push(quantLinearCase(dtype, { m: 1, ...l.gateUp }, s.tag, { label: l.gateUp.name, groupSize: 64 }));
    if (s.tag === 'qwen3-0.6b' && dtype === 'bf16') {
      cases.push(quantLinearCase(dtype, { m: 1, ...l.lmHead }, s.tag, { label: l.lmHead.name }));
      cases.push(
        quantLinearCase(dtype, { m: 1, ...l.lmHead }, s.tag, { label: l.lmHead.name, groupSize: 128 }),
      );
    }
  }
  return cases;
}

export const LINEAR_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  ...linearCases(dtype),
  ...quantizeCases(dtype),
  ...quantLinearCases(dtype),
]);
