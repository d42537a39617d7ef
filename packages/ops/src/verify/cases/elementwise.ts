/**
 * Verify cases of the elementwise family: activations, add/mul, RoPE and QK-norm + RoPE, SwiGLU (separate and
 * fused gate-up), embedding, and the eager baselines. Each runs at every float dtype over the odd widths and the
 * Qwen3 layer shapes; 'edge' cases reach the kernels' other paths (misaligned views that force the scalar path,
 * wide heads, the benchmark sizes).
 */
import type { FloatDType } from '../../dtype.js';
import { add, gelu, mul, silu } from '../../ops/activations.js';
import { rmsnormEager, swigluEager } from '../../ops/eager.js';
import { embedding, scatterRows } from '../../ops/embedding.js';
import { qkNormRope, rope } from '../../ops/rope.js';
import { swiglu, swigluFused } from '../../ops/swiglu.js';
import { Rng } from '../../random.js';
import { Tensor } from '../../tensor.js';
import { type ToleranceOp, toleranceFor } from '../../testing/tolerances.js';
import type { CaseInstance, VerifyCase } from '../types.js';
import { dims, ODD_WIDTHS, QWEN3_SHAPES, VERIFY_DTYPES, xorshift32 } from './shapes.js';

type Tag = VerifyCase['tag'];
type F = Tensor<FloatDType>;

/** Largest rotary position drawn (about the longest context of the benchmarks). */
const MAX_POSITION = 8192;
const EPS = 1e-6;

function makeCase(
  op: ToleranceOp | 'swigluFused',
  dtype: FloatDType,
  shape: string,
  tag: Tag,
  make: (seed: number) => CaseInstance,
): VerifyCase {
  const tolerance = toleranceFor(op === 'swigluFused' ? 'swiglu' : op, dtype);
  return { op, dtype, shape, tag, tolerance, make };
}

/** Seeded positions in [0, MAX_POSITION], the first 0 and the last MAX_POSITION (when there are two). */
function randomPositions(tokens: number, seed: number): Int32Array {
  const rng = new Rng(seed);
  const p = Int32Array.from({ length: tokens }, () => rng.nextInt(MAX_POSITION + 1));
  if (tokens > 0) p[0] = 0;
  if (tokens > 1) p[tokens - 1] = MAX_POSITION;
  return p;
}

/**
 * Seeded values drawn cheaply from raw bits (random sign and mantissa, magnitudes in [2^-6, 4)) of a xorshift32
 * stream seeded from PCG32: for the benchmark-sized inputs, where normal deviates would cost seconds on the CPU.
 */
function randomBits<D extends FloatDType>(shape: number[], dtype: D, seed: number): Tensor<D> {
  const next = xorshift32(new Rng(seed).nextU32());
  const n = shape.reduce((a, b) => a * b, 1);
  if (dtype === 'f32') {
    const bits = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const r = next();
      // sign from bit 31, exponent 121..128 from bits 0..2, 23 mantissa bits from bits 3..25
      bits[i] = ((r & 0x80000000) | ((121 + (r & 7)) << 23) | ((r >>> 3) & 0x7fffff)) >>> 0;
    }
    return Tensor.fromStorage(new Float32Array(bits.buffer), shape, 'f32') as Tensor<D>;
  }
  const half = new Uint16Array(n);
  const [bias, mant] = dtype === 'bf16' ? [127, 7] : [15, 10];
  for (let i = 0; i < n; i += 2) {
    const r = next();
    for (let k = 0; k < 2 && i + k < n; k++) {
      const w = (r >>> (16 * k)) & 0xffff;
      half[i + k] = (w & 0x8000) | ((bias - 6 + (w & 7)) << mant) | ((w >>> 3) & ((1 << mant) - 1));
    }
  }
  return Tensor.fromStorage(half, shape, dtype as 'f16' | 'bf16') as Tensor<D>;
}

/**
 * `count` elements starting one element into a fresh tensor: a view whose device address is not 16-byte aligned
 * once on the GPU, which sends the kernels down their scalar paths.
 */
function misaligned(t: Tensor, shape: number[]): F {
  const flat = t.reshape([t.size]);
  const tail = flat.slice(1);
  flat.dispose();
  const view = tail.reshape(shape);
  tail.dispose();
  return view as F;
}

/** Runs `fn` on a misaligned view of `t` (see {@link misaligned}), releasing the view afterwards. */
function onView(t: Tensor, shape: number[], fn: (view: F) => unknown): void {
  const view = misaligned(t, shape);
  try {
    fn(view);
  } finally {
    view.dispose();
  }
}

function withOffset<D extends FloatDType>(shape: number[], dtype: D, seed: number): Tensor<D> {
  const size = shape.reduce((a, b) => a * b, 1);
  return Tensor.randn([size + 1], { dtype, seed });
}

// ---------------------------------------------------------------------------------------------------------
// Activations and add/mul

function siluCase(dtype: FloatDType, shape: number[], tag: Tag, offset = false): VerifyCase {
  return makeCase('silu', dtype, dims(...shape) + (offset ? ' misaligned' : ''), tag, (seed) => {
    if (offset) {
      const x = withOffset(shape, dtype, seed);
      return {
        inputs: [x],
        expected: [silu(misaligned(x, shape))],
        run: ([gx], [out]) => onView(gx!, shape, (v) => silu(v, { out })),
      };
    }
    const x = Tensor.randn(shape, { dtype, seed, std: 2 });
    return { inputs: [x], expected: [silu(x)], run: ([gx], [out]) => void silu(gx as F, { out }) };
  });
}

function geluCase(dtype: FloatDType, shape: number[], tag: Tag, approximate: 'none' | 'tanh'): VerifyCase {
  const label = dims(...shape) + (approximate === 'tanh' ? ' tanh' : '');
  return makeCase('gelu', dtype, label, tag, (seed) => {
    const x = Tensor.randn(shape, { dtype, seed, std: 2 });
    return {
      inputs: [x],
      expected: [gelu(x, { approximate })],
      run: ([gx], [out]) => void gelu(gx as F, { approximate, out }),
    };
  });
}

function binaryCase(
  op: 'add' | 'mul',
  dtype: FloatDType,
  shape: number[],
  tag: Tag,
  offset = false,
): VerifyCase {
  const fn = op === 'add' ? add : mul;
  return makeCase(op, dtype, dims(...shape) + (offset ? ' misaligned' : ''), tag, (seed) => {
    const b = Tensor.randn(shape, { dtype, seed: seed + 1 });
    if (offset) {
      const a = withOffset(shape, dtype, seed);
      return {
        inputs: [a, b],
        expected: [fn(misaligned(a, shape), b)],
        run: ([ga, gb], [out]) => onView(ga!, shape, (v) => fn(v, gb as F, { out })),
      };
    }
    const a = Tensor.randn(shape, { dtype, seed });
    return {
      inputs: [a, b],
      expected: [fn(a, b)],
      run: ([ga, gb], [out]) => void fn(ga as F, gb as F, { out }),
    };
  });
}

// ---------------------------------------------------------------------------------------------------------
// RoPE and QK-norm + RoPE

interface RopeShape {
  tokens: number;
  heads: number;
  headDim: number;
  /** Positions as an i32 CUDA tensor (true) or uploaded from a host array (false). */
  devicePositions: boolean;
  /** Run on a view one element into its buffer (scalar path). */
  offset?: boolean;
  /** Cheap raw-bit inputs instead of normal deviates (benchmark sizes). */
  bits?: boolean;
}

function ropeLabel(s: RopeShape): string {
  return (
    dims(s.tokens, s.heads, s.headDim) +
    (s.devicePositions ? ' pos:cuda' : ' pos:host') +
    (s.offset ? ' misaligned' : '')
  );
}

/** The input of a RoPE case, and how to run on it: directly, or on its misaligned view. */
function ropeInput(
  dtype: FloatDType,
  s: RopeShape,
  seed: number,
): { x: Tensor; on: (t: Tensor, fn: (x: F) => unknown) => void } {
  const shape = [s.tokens, s.heads, s.headDim];
  if (s.offset) return { x: withOffset(shape, dtype, seed), on: (t, fn) => onView(t, shape, fn) };
  const x = s.bits ? randomBits(shape, dtype, seed) : Tensor.randn(shape, { dtype, seed });
  return { x, on: (t, fn) => void fn(t as F) };
}

/** The reference input: the tensor itself or its misaligned view. */
function referenceInput(s: RopeShape, x: Tensor): F {
  return s.offset ? misaligned(x, [s.tokens, s.heads, s.headDim]) : (x as F);
}

function ropeCase(dtype: FloatDType, s: RopeShape, tag: Tag): VerifyCase {
  return makeCase('rope', dtype, ropeLabel(s), tag, (seed) => {
    const { x, on } = ropeInput(dtype, s, seed);
    const positions = randomPositions(s.tokens, seed + 7);
    const pos = Tensor.fromStorage(positions, [s.tokens], 'i32');
    const expected = [rope(referenceInput(s, x), { positions })];
    if (s.devicePositions) {
      return {
        inputs: [x, pos],
        expected,
        run: ([gx, gp], [out]) => on(gx!, (v) => rope(v, { positions: gp as Tensor<'i32'>, out })),
      };
    }
    return { inputs: [x], expected, run: ([gx], [out]) => on(gx!, (v) => rope(v, { positions, out })) };
  });
}

function qkNormRopeCase(dtype: FloatDType, s: RopeShape, tag: Tag): VerifyCase {
  return makeCase('qkNormRope', dtype, ropeLabel(s), tag, (seed) => {
    const { x, on } = ropeInput(dtype, s, seed);
    const w = Tensor.randn([s.headDim], { dtype, seed: seed + 1 });
    const positions = randomPositions(s.tokens, seed + 7);
    const pos = Tensor.fromStorage(positions, [s.tokens], 'i32');
    const expected = [qkNormRope(referenceInput(s, x), w, { positions, eps: EPS })];
    if (s.devicePositions) {
      return {
        inputs: [x, w, pos],
        expected,
        run: ([gx, gw, gp], [out]) =>
          on(gx!, (v) => qkNormRope(v, gw as F, { positions: gp as Tensor<'i32'>, eps: EPS, out })),
      };
    }
    return {
      inputs: [x, w],
      expected,
      run: ([gx, gw], [out]) => on(gx!, (v) => qkNormRope(v, gw as F, { positions, eps: EPS, out })),
    };
  });
}

// ---------------------------------------------------------------------------------------------------------
// SwiGLU

function swigluCase(dtype: FloatDType, rows: number, ffn: number, tag: Tag, offset = false): VerifyCase {
  const shape = [rows, ffn];
  return makeCase('swiglu', dtype, dims(rows, ffn) + (offset ? ' misaligned' : ''), tag, (seed) => {
    const up = Tensor.randn(shape, { dtype, seed: seed + 1 });
    if (offset) {
      const gate = withOffset(shape, dtype, seed);
      return {
        inputs: [gate, up],
        expected: [swiglu(misaligned(gate, shape), up)],
        run: ([gg, gu], [out]) => onView(gg!, shape, (v) => swiglu(v, gu as F, { out })),
      };
    }
    const gate = Tensor.randn(shape, { dtype, seed, std: 2 });
    return {
      inputs: [gate, up],
      expected: [swiglu(gate, up)],
      run: ([gg, gu], [out]) => void swiglu(gg as F, gu as F, { out }),
    };
  });
}

function swigluFusedCase(dtype: FloatDType, rows: number, ffn: number, tag: Tag): VerifyCase {
  return makeCase('swigluFused', dtype, dims(rows, 2 * ffn), tag, (seed) => {
    const gateUp = Tensor.randn([rows, 2 * ffn], { dtype, seed, std: 2 });
    return {
      inputs: [gateUp],
      expected: [swigluFused(gateUp)],
      run: ([g], [out]) => void swigluFused(g as F, { out }),
    };
  });
}

function swigluEagerCase(dtype: FloatDType, rows: number, ffn: number, tag: Tag): VerifyCase {
  return makeCase('swigluEager', dtype, dims(rows, ffn), tag, (seed) => {
    const gate = Tensor.randn([rows, ffn], { dtype, seed });
    const up = Tensor.randn([rows, ffn], { dtype, seed: seed + 1 });
    return {
      inputs: [gate, up],
      expected: [swigluEager(gate, up)],
      run: ([gg, gu], [out]) => void swigluEager(gg as F, gu as F, { out }),
    };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Embedding and the eager RMSNorm

function embeddingCase(
  dtype: FloatDType,
  count: number,
  vocab: number,
  hidden: number,
  tag: Tag,
  deviceIds: boolean,
): VerifyCase {
  const label = `${dims(count)} of ${dims(vocab, hidden)}${deviceIds ? ' ids:cuda' : ' ids:host'}`;
  return makeCase('embedding', dtype, label, tag, (seed) => {
    const table = Tensor.randn([vocab, hidden], { dtype, seed });
    const rng = new Rng(seed + 3);
    const ids = Int32Array.from({ length: count }, () => rng.nextInt(vocab));
    ids[0] = vocab - 1;
    if (count > 1) ids[1] = 0;
    const idTensor = Tensor.fromStorage(ids, [count], 'i32');
    const expected = [embedding(ids, table)];
    if (deviceIds) {
      return {
        inputs: [table, idTensor],
        expected,
        run: ([gt, gi], [out]) => void embedding(gi as Tensor<'i32'>, gt as F, { out }),
      };
    }
    return { inputs: [table], expected, run: ([gt], [out]) => void embedding(ids, gt as F, { out }) };
  });
}

/** `count` distinct random rows of `rows` (a partial Fisher–Yates shuffle), the last row among them. */
export function distinctRows(rows: number, count: number, seed: number): Int32Array {
  const rng = new Rng(seed);
  const all = Int32Array.from({ length: rows }, (_, i) => i);
  for (let i = 0; i < count; i++) {
    const j = i + rng.nextInt(rows - i);
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  const index = all.slice(0, count);
  if (count > 0 && !index.includes(rows - 1)) index[0] = rows - 1;
  return index;
}

/** KV-cache append: `count` rows written at distinct random positions of a `rows`-row cache, in place. */
function scatterRowsCase(
  dtype: FloatDType,
  rows: number,
  count: number,
  rowShape: number[],
  tag: Tag,
  deviceIndex: boolean,
): VerifyCase {
  const label = `${dims(count, ...rowShape)} into ${dims(rows, ...rowShape)}${deviceIndex ? ' index:cuda' : ' index:host'}`;
  const base = makeCase('embedding', dtype, label, tag, (seed) => {
    const dst = Tensor.randn([rows, ...rowShape], { dtype, seed });
    const src = Tensor.randn([count, ...rowShape], { dtype, seed: seed + 1 });
    const index = distinctRows(rows, count, seed + 2);
    const expected = [scatterRows(dst.clone(), src, index)];
    const indexTensor = Tensor.fromStorage(index, [count], 'i32');
    return {
      inputs: deviceIndex ? [dst, src, indexTensor] : [dst, src],
      expected,
      run: ([gd, gs, gi], [out]) => {
        scatterRows(gd as F, gs as F, deviceIndex ? (gi as Tensor<'i32'>) : index);
        out!.copyFrom(gd!);
      },
    };
  });
  return { ...base, op: 'scatterRows' };
}

function rmsnormEagerCase(dtype: FloatDType, rows: number, n: number, tag: Tag): VerifyCase {
  return makeCase('rmsnormEager', dtype, dims(rows, n), tag, (seed) => {
    const x = Tensor.randn([rows, n], { dtype, seed });
    // RMSNorm weights sit around 1 in trained models; the eager path rounds x̂ before multiplying by them.
    const w = Tensor.rand([n], { dtype, seed: seed + 1, low: 0.5, high: 1.5 });
    return {
      inputs: [x, w],
      expected: [rmsnormEager(x, w, { eps: EPS })],
      run: ([gx, gw], [out]) => void rmsnormEager(gx as F, gw as F, { eps: EPS, out }),
    };
  });
}

// ---------------------------------------------------------------------------------------------------------

function casesFor(dtype: FloatDType): VerifyCase[] {
  const odd: VerifyCase[] = ODD_WIDTHS.flatMap((n, i) => [
    siluCase(dtype, [3, n], 'odd'),
    geluCase(dtype, [3, n], 'odd', 'none'),
    geluCase(dtype, [3, n], 'odd', 'tanh'),
    binaryCase('add', dtype, [3, n], 'odd'),
    binaryCase('mul', dtype, [3, n], 'odd'),
    ropeCase(dtype, { tokens: 3, heads: 2, headDim: 2 * n, devicePositions: i % 2 === 0 }, 'odd'),
    qkNormRopeCase(dtype, { tokens: 3, heads: 2, headDim: 2 * n, devicePositions: i % 2 === 1 }, 'odd'),
    swigluCase(dtype, 3, n, 'odd'),
    swigluFusedCase(dtype, 3, n, 'odd'),
    swigluEagerCase(dtype, 3, n, 'odd'),
    embeddingCase(dtype, 5, 97, n, 'odd', i % 2 === 0),
    scatterRowsCase(dtype, 97, 5, [3, n], 'odd', i % 2 === 1),
    rmsnormEagerCase(dtype, 3, n, 'odd'),
  ]);
  const qwen: VerifyCase[] = QWEN3_SHAPES.flatMap((s) => [
    siluCase(dtype, [16, s.ffn], s.tag),
    geluCase(dtype, [16, s.hidden], s.tag, 'none'),
    geluCase(dtype, [16, s.hidden], s.tag, 'tanh'),
    binaryCase('add', dtype, [64, s.hidden], s.tag),
    binaryCase('mul', dtype, [64, s.hidden], s.tag),
    ropeCase(dtype, { tokens: 1, heads: s.heads, headDim: s.headDim, devicePositions: true }, s.tag),
    ropeCase(dtype, { tokens: 17, heads: s.heads, headDim: s.headDim, devicePositions: false }, s.tag),
    ropeCase(dtype, { tokens: 17, heads: s.kvHeads, headDim: s.headDim, devicePositions: true }, s.tag),
    qkNormRopeCase(dtype, { tokens: 1, heads: s.heads, headDim: s.headDim, devicePositions: true }, s.tag),
    qkNormRopeCase(dtype, { tokens: 17, heads: s.heads, headDim: s.headDim, devicePositions: true }, s.tag),
    qkNormRopeCase(
      dtype,
      { tokens: 17, heads: s.kvHeads, headDim: s.headDim, devicePositions: false },
      s.tag,
    ),
    swigluCase(dtype, 1, s.ffn, s.tag),
    swigluCase(dtype, 16, s.ffn, s.tag),
    swigluFusedCase(dtype, 16, s.ffn, s.tag),
    swigluEagerCase(dtype, 16, s.ffn, s.tag),
    // 2^21 / hidden rows of the 151936-row vocabulary keep the CPU side small; the kernel sees the same rows.
    embeddingCase(dtype, 1, 2 ** 21 / s.hidden, s.hidden, s.tag, true),
    embeddingCase(dtype, 33, 2 ** 21 / s.hidden, s.hidden, s.tag, false),
    scatterRowsCase(dtype, 4096, 1, [s.kvHeads, s.headDim], s.tag, true),
    scatterRowsCase(dtype, 4096, 77, [s.kvHeads, s.headDim], s.tag, false),
    rmsnormEagerCase(dtype, 1, s.hidden, s.tag),
    rmsnormEagerCase(dtype, 64, s.hidden, s.tag),
  ]);
  const edge: VerifyCase[] = [
    // Misaligned views: the scalar paths.
    siluCase(dtype, [3, 4096], 'edge', true),
    binaryCase('add', dtype, [5, 1024], 'edge', true),
    swigluCase(dtype, 3, 3072, 'edge', true),
    ropeCase(dtype, { tokens: 5, heads: 8, headDim: 128, devicePositions: true, offset: true }, 'edge'),
    qkNormRopeCase(dtype, { tokens: 5, heads: 8, headDim: 128, devicePositions: true, offset: true }, 'edge'),
    // Wider heads: two and four pair-vectors per lane, and the one-warp-per-head kernel.
    ropeCase(dtype, { tokens: 3, heads: 3, headDim: 256, devicePositions: true }, 'edge'),
    ropeCase(dtype, { tokens: 3, heads: 3, headDim: 1024, devicePositions: true }, 'edge'),
    ropeCase(dtype, { tokens: 2, heads: 2, headDim: 4096, devicePositions: false }, 'edge'),
    qkNormRopeCase(dtype, { tokens: 3, heads: 3, headDim: 256, devicePositions: true }, 'edge'),
    qkNormRopeCase(dtype, { tokens: 3, heads: 3, headDim: 1024, devicePositions: true }, 'edge'),
    qkNormRopeCase(dtype, { tokens: 2, heads: 2, headDim: 4096, devicePositions: false }, 'edge'),
    // Benchmark sizes: RoPE over 512 tokens of 32 heads, SwiGLU at Qwen3-32B's ffn 18944.
    ropeCase(dtype, { tokens: 512, heads: 32, headDim: 128, devicePositions: true }, 'edge'),
    qkNormRopeCase(dtype, { tokens: 512, heads: 32, headDim: 128, devicePositions: true }, 'edge'),
    swigluCase(dtype, 4, 18944, 'edge'),
    swigluFusedCase(dtype, 4, 18944, 'edge'),
  ];
  return [...odd, ...qwen, ...edge];
}

export const ELEMENTWISE_CASES: VerifyCase[] = [
  ...VERIFY_DTYPES.flatMap(casesFor),
  // The largest RoPE benchmark size, once: 8192 tokens × 32 heads × 128 (raw-bit inputs keep the CPU side fast).
  ropeCase('bf16', { tokens: 8192, heads: 32, headDim: 128, devicePositions: true, bits: true }, 'edge'),
];
