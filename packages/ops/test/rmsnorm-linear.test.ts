/**
 * rmsnormLinear against a float64 oracle written here: h = x·g / sqrt(mean(x²) + eps) per row, rounded to the dtype
 * (the hand-over between the two ops), then y = h · Wᵀ in float64, rounded once. The variants: x + residual rounded
 * to the dtype before the norm; no norm; SwiGLU over gate and up sums rounded to float32; and linearSwiglu.
 */
import { describe, expect, it } from 'vitest';
import {
  cudaAvailable,
  cudaStatus,
  DEFAULT_RMS_EPS,
  type FloatDType,
  linear,
  linearSwiglu,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  rmsnormLinear,
  roundToDType,
  type Shape,
  Tensor,
} from '../src/index.js';
import { assertClose } from '../src/testing/index.js';
import {
  compare,
  expectQkError,
  FLOAT_DTYPES,
  f64,
  ODD_SIZES,
  REL_L2,
  randn,
  sameBits,
  ulpAt,
} from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Oracle and tolerances.
// ---------------------------------------------------------------------------------------------------------

/** What the oracle fuses besides the norm and the projection. */
interface Variant {
  /** Added to x (the sum rounded to the dtype) before the norm. */
  residual?: Float64Array;
  /** SwiGLU over gate rows [0, n/2) and up rows [n/2, n): silu(g) · u with g and u rounded to float32. */
  glu?: boolean;
}

/**
 * float64 oracle over rows of k: x (+ residual, rounded to `dtype`), normalised with gains `g` (rounded to `dtype`
 * when `roundHidden`; no norm when `g` is null), then its dot product with every weight row, rounded to `dtype`;
 * with `glu`, silu(gate) · up over the two halves of the weight rows instead.
 */
function oracle(
  x: Float64Array,
  g: Float64Array | null,
  w: Float64Array,
  k: number,
  n: number,
  eps: number,
  dtype: FloatDType,
  roundHidden = true,
  variant: Variant = {},
): Float64Array {
  const rows = k === 0 ? 0 : x.length / k;
  const outs = variant.glu ? n / 2 : n;
  const y = new Float64Array(rows * outs);
  const dot = (h: Float64Array, o: number): number => {
    let s = 0;
    for (let i = 0; i < k; i++) s += h[i]! * w[o * k + i]!;
    return s;
  };
  for (let r = 0; r < rows; r++) {
    const h = new Float64Array(k);
    for (let i = 0; i < k; i++) {
      const v = x[r * k + i]!;
      h[i] = variant.residual ? roundToDType(v + variant.residual[r * k + i]!, dtype) : v;
    }
    if (g !== null) {
      let sq = 0;
      for (let i = 0; i < k; i++) sq += h[i]! ** 2;
      const scale = 1 / Math.sqrt(sq / k + eps);
      for (let i = 0; i < k; i++) {
        const v = h[i]! * scale * g[i]!;
        h[i] = roundHidden ? roundToDType(v, dtype) : v;
      }
    }
    for (let o = 0; o < outs; o++) {
      if (!variant.glu) {
        y[r * outs + o] = roundToDType(dot(h, o), dtype);
        continue;
      }
      const gate = Math.fround(dot(h, o));
      const up = Math.fround(dot(h, outs + o));
      y[r * outs + o] = roundToDType((gate / (1 + Math.exp(-gate))) * up, dtype);
    }
  }
  return y;
}

/**
 * Within one output step of the oracle everywhere, and relative L2 within the format's rounding. The op and the
 * oracle both sum in float64 but in different orders, which can move a hidden value across a rounding boundary
 * (rarely) and so one output by a step.
 */
function expectNear(actual: Tensor, expected: Float64Array, dtype: FloatDType): void {
  const got = f64(actual);
  const { relL2 } = compare(got, expected);
  expect(relL2).toBeLessThanOrEqual(REL_L2[dtype]);
  let worst = 0;
  let at = -1;
  for (let i = 0; i < got.length; i++) {
    const d =
      Math.abs(got[i]! - expected[i]!) / ulpAt(Math.max(Math.abs(got[i]!), Math.abs(expected[i]!)), dtype);
    if (d > worst) [worst, at] = [d, i];
  }
  expect(worst, `worst element ${at}: got ${got[at]}, expected ${expected[at]}`).toBeLessThanOrEqual(1);
}

function weights<D extends FloatDType>(n: number, k: number, dtype: D, seed: number): Tensor<D> {
  const a = Math.sqrt(3 / Math.max(k, 1));
  return Tensor.rand([n, k], { dtype, seed, low: -a, high: a });
}

function gains<D extends FloatDType>(k: number, dtype: D, seed: number): Tensor<D> {
  return Tensor.randn([k], { dtype, seed, mean: 1, std: 0.5 });
}

const CASES = FLOAT_DTYPES.flatMap((dtype, di) =>
  ODD_SIZES.flatMap((k, ki) =>
    [1, 7, 111].map((n, ni) => ({ dtype, k, n, seed: 30_000 + di * 1000 + ki * 10 + ni })),
  ),
);

// ---------------------------------------------------------------------------------------------------------
describe('rmsnormLinear', () => {
  it.each(CASES)('$dtype K=$k N=$n, 3 rows: matches the float64 oracle', ({ dtype, k, n, seed }) => {
    const x = randn([3, k], dtype, seed);
    const g = gains(k, dtype, seed + 1);
    const w = weights(n, k, dtype, seed + 2);
    const y = rmsnormLinear(x, g, w);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, oracle(f64(x), f64(g), f64(w), k, n, DEFAULT_RMS_EPS, dtype), dtype);
  });

  it.each(FLOAT_DTYPES)('%s: keeps leading axes and honours eps', (dtype) => {
    const seed = 31_000 + FLOAT_DTYPES.indexOf(dtype) * 10;
    // Small activations make eps matter: mean(x²) ≈ 1e-4 against eps = 1e-3.
    const x = randn([2, 3, 33], dtype, seed, 1e-2);
    const g = gains(33, dtype, seed + 1);
    const w = weights(5, 33, dtype, seed + 2);
    const y = rmsnormLinear(x, g, w, { eps: 1e-3 });
    expect(y.shape).toEqual([2, 3, 5]);
    expectNear(y, oracle(f64(x), f64(g), f64(w), 33, 5, 1e-3, dtype), dtype);
  });

  it('rounds the normalised activations to the dtype before the product', () => {
    // bf16: x = [1, 1 + 2^-7] normalises to about [0.99611, 1.00392], which bf16 rounds to [255/256, 1]. With
    // W = [[1, -1]] the difference of the rounded values is -2^-8, that of the exact ones about -0.00778.
    const dtype = 'bf16';
    const x = Tensor.fromArray([[1, 1 + 2 ** -7]], { dtype });
    const g = Tensor.fromArray([1, 1], { dtype });
    const w = Tensor.fromArray([[1, -1]], { dtype });
    const rounded = oracle(f64(x), f64(g), f64(w), 2, 1, DEFAULT_RMS_EPS, dtype);
    const unrounded = oracle(f64(x), f64(g), f64(w), 2, 1, DEFAULT_RMS_EPS, dtype, false);
    expect(rounded[0]).toBe(-(2 ** -8));
    expect(unrounded[0]).not.toBe(rounded[0]);
    expect(rmsnormLinear(x, g, w).toArray()).toEqual([rounded[0]]);
  });

  it('writes into `out` and returns it', () => {
    const x = randn([2, 16], 'f16', 31_500);
    const g = gains(16, 'f16', 31_501);
    const w = weights(3, 16, 'f16', 31_502);
    const out = Tensor.empty([2, 3], 'f16');
    expect(rmsnormLinear(x, g, w, { out })).toBe(out);
    expectNear(out, oracle(f64(x), f64(g), f64(w), 16, 3, DEFAULT_RMS_EPS, 'f16'), 'f16');
    expectQkError(
      () => rmsnormLinear(x, g, w, { out: Tensor.empty([2, 4], 'f16') }),
      QkShapeError,
      'QK_SHAPE',
      '"out"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, w, { out: Tensor.empty([2, 3], 'f32') }),
      QkDtypeError,
      'QK_DTYPE',
      '"out"',
    );
  });

  it('validates its arguments', () => {
    const x = randn([3, 8], 'f32', 31_700);
    const g = gains(8, 'f32', 31_701);
    const w = weights(4, 8, 'f32', 31_702);
    const ints = (shape: Shape) =>
      Tensor.fromArray(
        Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i + 1),
        { shape, dtype: 'i32' },
      ) as unknown as Tensor<'f32'>;
    expectQkError(() => rmsnormLinear(ints([3, 8]), g, w), QkDtypeError, 'QK_DTYPE', 'rmsnormLinear:', '"x"');
    expectQkError(
      () => rmsnormLinear(x, ints([8]), w),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormLinear:',
      '"normWeight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, ints([4, 8])),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormLinear:',
      '"weight"',
    );
    expectQkError(
      () => rmsnormLinear(x, gains(8, 'bf16', 31_703) as unknown as Tensor<'f32'>, w),
      QkDtypeError,
      'QK_DTYPE',
      '"normWeight"',
      'bf16',
    );
    expectQkError(
      () => rmsnormLinear(x, g, weights(4, 8, 'f16', 31_704) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      '"weight"',
      'f16',
    );
    expectQkError(
      () => rmsnormLinear(x, gains(7, 'f32', 31_705), w),
      QkShapeError,
      'QK_SHAPE',
      '"normWeight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, weights(4, 9, 'f32', 31_706)),
      QkShapeError,
      'QK_SHAPE',
      '"weight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, randn([32], 'f32', 31_707)),
      QkShapeError,
      'QK_SHAPE',
      '"weight"',
    );
    expectQkError(() => rmsnormLinear(Tensor.fromArray(2), g, w), QkShapeError, 'QK_SHAPE', '"x"');
    for (const eps of [0, -1e-6, Number.NaN, Number.POSITIVE_INFINITY, '1e-6']) {
      expectQkError(
        () => rmsnormLinear(x, g, w, { eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        'rmsnormLinear:',
        '"eps"',
      );
    }
    const gone = randn([3, 8], 'f32', 31_708);
    gone.dispose();
    expectQkError(() => rmsnormLinear(gone, g, w), QkDisposedError, 'QK_DISPOSED', 'rmsnormLinear');
  });
});

// ---------------------------------------------------------------------------------------------------------
// The residual and SwiGLU variants, the norm-free form and linearSwiglu.
// ---------------------------------------------------------------------------------------------------------

const VARIANTS = [
  { name: 'residual', residual: true, glu: false, norm: true },
  { name: 'swiglu', residual: false, glu: true, norm: true },
  { name: 'residual + swiglu', residual: true, glu: true, norm: true },
  { name: 'no norm + swiglu', residual: false, glu: true, norm: false },
] as const;

const VARIANT_CASES = FLOAT_DTYPES.flatMap((dtype, di) =>
  VARIANTS.flatMap((variant, vi) =>
    ODD_SIZES.flatMap((k, ki) =>
      [1, 7, 111].map((f, fi) => ({
        dtype,
        variant,
        k,
        f,
        seed: 32_000 + di * 2000 + vi * 200 + ki * 10 + fi,
      })),
    ),
  ),
);

describe('rmsnormLinear with residual, glu and no norm', () => {
  it.each(VARIANT_CASES)(
    '$dtype $variant.name K=$k F=$f, 3 rows: matches the float64 oracle',
    ({ dtype, variant, k, f, seed }) => {
      const x = randn([3, k], dtype, seed);
      const g = variant.norm ? gains(k, dtype, seed + 1) : null;
      const w = weights(variant.glu ? 2 * f : f, k, dtype, seed + 2);
      const r = variant.residual ? randn([3, k], dtype, seed + 3) : undefined;
      const residualOut = r === undefined ? undefined : Tensor.full([3, k], Number.NaN, dtype);
      const y = rmsnormLinear(x, g, w, {
        residual: r,
        residualOut,
        ...(variant.glu ? { glu: 'swiglu' as const } : {}),
      });
      expect(y.shape).toEqual([3, f]);
      expect(y.dtype).toBe(dtype);
      const residual = r === undefined ? undefined : f64(r);
      const expected = oracle(f64(x), g && f64(g), f64(w), k, w.shape[0]!, DEFAULT_RMS_EPS, dtype, true, {
        residual,
        glu: variant.glu,
      });
      expectNear(y, expected, dtype);
      if (residualOut !== undefined && residual !== undefined) {
        const sum = Array.from(f64(x), (v, i) => roundToDType(v + residual[i]!, dtype));
        expect(sameBits(residualOut.toArray(), sum)).toBe(true);
      }
    },
  );

  it.each(FLOAT_DTYPES)('%s: keeps leading axes with residual and glu, and writes into out', (dtype) => {
    const seed = 33_000 + FLOAT_DTYPES.indexOf(dtype) * 10;
    const x = randn([2, 3, 40], dtype, seed);
    const r = randn([2, 3, 40], dtype, seed + 1);
    const g = gains(40, dtype, seed + 2);
    const w = weights(18, 40, dtype, seed + 3);
    const out = Tensor.full([2, 3, 9], Number.NaN, dtype);
    const residualOut = Tensor.empty([2, 3, 40], dtype);
    const y = rmsnormLinear(x, g, w, { residual: r, residualOut, out, glu: 'swiglu', eps: 1e-3 });
    expect(y).toBe(out);
    const expected = oracle(f64(x), f64(g), f64(w), 40, 18, 1e-3, dtype, true, {
      residual: f64(r),
      glu: true,
    });
    expectNear(out, expected, dtype);
    expect(residualOut.shape).toEqual([2, 3, 40]);
  });

  it('normalises the residual sum rounded to the dtype', () => {
    // bf16: 1 + 2^-9 is not representable, so x + residual = 1 + 2^-9 rounds to 1 and the row [1, 1] normalises to
    // exactly [1, 1]; y = h·[1, -1] = 0. Normalising the unrounded sum would give a non-zero difference.
    const dtype = 'bf16';
    const x = Tensor.fromArray([[1, 1]], { dtype });
    const residual = Tensor.fromArray([[2 ** -9, 0]], { dtype });
    const g = Tensor.fromArray([1, 1], { dtype });
    const w = Tensor.fromArray([[1, -1]], { dtype });
    const residualOut = Tensor.empty([1, 2], dtype);
    expect(rmsnormLinear(x, g, w, { residual, residualOut, eps: 1e-30 }).toArray()).toEqual([0]);
    expect(residualOut.toArray()).toEqual([1, 1]);
  });

  it('keeps gate and up in float32 and rounds once (bf16)', () => {
    // x = [1, 1], gate row [1, 2^-9], up row [64, 0]: g = 1 + 2^-9 (exact in f32, 1 in bf16), u = 64.
    // silu(1 + 2^-9) · 64 ≈ 46.904 rounds to 47 in bf16; with g rounded to bf16 first, silu(1) · 64 ≈ 46.788 → 46.75.
    const dtype = 'bf16';
    const x = Tensor.fromArray([[1, 1]], { dtype });
    const gateUp = Tensor.fromArray(
      [
        [1, 2 ** -9],
        [64, 0],
      ],
      { dtype },
    );
    const silu = (v: number) => v / (1 + Math.exp(-v));
    expect(roundToDType(silu(1 + 2 ** -9) * 64, dtype)).toBe(47);
    expect(roundToDType(silu(1) * 64, dtype)).toBe(46.75);
    expect(linearSwiglu(x, gateUp).toArray()).toEqual([47]);
    expect(rmsnormLinear(x, null, gateUp, { glu: 'swiglu' }).toArray()).toEqual([47]);
  });

  it('without a norm or glu it is linear', () => {
    const x = randn([4, 33], 'bf16', 33_100);
    const w = weights(9, 33, 'bf16', 33_101);
    expect(rmsnormLinear(x, null, w).toArray()).toEqual(linear(x, w).toArray());
  });

  it.each(FLOAT_DTYPES)('%s: linearSwiglu equals rmsnormLinear(x, null, gateUp, { glu })', (dtype) => {
    const seed = 33_200 + FLOAT_DTYPES.indexOf(dtype) * 10;
    const x = randn([2, 5, 111], dtype, seed);
    const gateUp = weights(2 * 7, 111, dtype, seed + 1);
    const y = linearSwiglu(x, gateUp);
    expect(y.shape).toEqual([2, 5, 7]);
    expect(sameBits(y.toArray(), rmsnormLinear(x, null, gateUp, { glu: 'swiglu' }).toArray())).toBe(true);
    const expected = oracle(f64(x), null, f64(gateUp), 111, 14, DEFAULT_RMS_EPS, dtype, true, { glu: true });
    expectNear(y, expected, dtype);
    const out = Tensor.full([2, 5, 7], Number.NaN, dtype);
    expect(linearSwiglu(x, gateUp, { out })).toBe(out);
    expect(sameBits(out.toArray(), y.toArray())).toBe(true);
  });

  it('propagates NaN to the rows it reaches', () => {
    const vals = randn([2, 16], 'f32', 33_300).toArray();
    vals[3] = Number.NaN;
    const x = Tensor.fromArray(vals, { shape: [2, 16] });
    const y = linearSwiglu(x, weights(6, 16, 'f32', 33_301)).toArray();
    for (let i = 0; i < 3; i++) expect(y[i]).toBeNaN();
    for (let i = 3; i < 6; i++) expect(Number.isFinite(y[i]!)).toBe(true);
  });
});

describe('rmsnormLinear and linearSwiglu argument errors', () => {
  const x = randn([3, 8], 'f32', 33_400);
  const g = gains(8, 'f32', 33_401);
  const w = weights(6, 8, 'f32', 33_402);
  const r = randn([3, 8], 'f32', 33_403);

  it('refuses residualOut without residual, and a residual without a norm', () => {
    expectQkError(
      () => rmsnormLinear(x, g, w, { residualOut: Tensor.empty([3, 8]) }),
      QkValueError,
      'QK_VALUE',
      'rmsnormLinear:',
      '"residualOut"',
      'residual',
    );
    expectQkError(
      () => rmsnormLinear(x, null, w, { residual: r }),
      QkValueError,
      'QK_VALUE',
      'rmsnormLinear:',
      '"residual"',
      'normWeight',
    );
  });

  it('checks the residual and residualOut tensors', () => {
    expectQkError(
      () => rmsnormLinear(x, g, w, { residual: randn([3, 9], 'f32', 33_404) }),
      QkShapeError,
      'QK_SHAPE',
      '"residual"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, w, { residual: randn([3, 8], 'bf16', 33_405) as unknown as Tensor<'f32'> }),
      QkDtypeError,
      'QK_DTYPE',
      '"residual"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, w, { residual: r, residualOut: Tensor.empty([3, 7]) }),
      QkShapeError,
      'QK_SHAPE',
      'rmsnormLinear:',
      '"residualOut"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, w, { residual: r, residualOut: Tensor.empty([3, 8], 'f16') }),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormLinear:',
      '"residualOut"',
    );
    const gone = randn([3, 8], 'f32', 33_406);
    gone.dispose();
    expectQkError(() => rmsnormLinear(x, g, w, { residual: gone }), QkDisposedError, 'QK_DISPOSED');
  });

  it('refuses a residualOut that shares memory with x, residual or out', () => {
    const overlaps = (residualOut: Tensor, xs = x, rs = r, out?: Tensor) =>
      expectQkError(
        () => rmsnormLinear(xs, g, w, { residual: rs, residualOut, out }),
        QkValueError,
        'QK_VALUE',
        'rmsnormLinear:',
        '"residualOut"',
        'shares memory',
      );
    expect(overlaps(x).message).toContain('"x"');
    expect(overlaps(r).message).toContain('"residual"');
    expect(overlaps(x.reshape([24]).reshape([3, 8])).message).toContain('"x"');
    // Rows 1..3 of one buffer against rows 0..2: a partial overlap.
    const buffer = randn([4, 8], 'f32', 33_407);
    expect(overlaps(buffer.slice(1, 4), buffer.slice(0, 3)).message).toContain('"x"');
    // out and residualOut in one buffer.
    const both = Tensor.empty([3, 8]);
    const w8 = weights(8, 8, 'f32', 33_408);
    expectQkError(
      () => rmsnormLinear(x, g, w8, { residual: r, residualOut: both, out: both }),
      QkValueError,
      'QK_VALUE',
      '"residualOut"',
      '"out"',
    );
    // Disjoint rows of one buffer are fine.
    const rows = randn([6, 8], 'f32', 33_409);
    const [xs, sum] = [rows.slice(0, 3), rows.slice(3, 6)];
    const y = rmsnormLinear(xs, g, w, { residual: r, residualOut: sum });
    expectNear(
      y,
      oracle(f64(xs), f64(g), f64(w), 8, 6, DEFAULT_RMS_EPS, 'f32', true, { residual: f64(r) }),
      'f32',
    );
  });

  it('refuses an odd number of gate/up rows and an unknown glu', () => {
    const odd = weights(7, 8, 'f32', 33_410);
    expectQkError(
      () => rmsnormLinear(x, g, odd, { glu: 'swiglu' }),
      QkValueError,
      'QK_VALUE',
      'rmsnormLinear:',
      '"weight"',
      'even',
    );
    expectQkError(() => linearSwiglu(x, odd), QkValueError, 'QK_VALUE', 'linearSwiglu:', '"gateUp"', 'even');
    expectQkError(
      () => rmsnormLinear(x, g, w, { glu: 'geglu' as 'swiglu' }),
      QkValueError,
      'QK_VALUE',
      '"glu"',
    );
  });

  it('expects out shaped [..., ffn] with glu', () => {
    expectQkError(
      () => rmsnormLinear(x, g, w, { glu: 'swiglu', out: Tensor.empty([3, 6]) }),
      QkShapeError,
      'QK_SHAPE',
      'rmsnormLinear:',
      '"out"',
      '[3, 3]',
    );
    expectQkError(
      () => linearSwiglu(x, w, { out: Tensor.empty([3, 3], 'bf16') }),
      QkDtypeError,
      'QK_DTYPE',
      'linearSwiglu:',
      '"out"',
    );
  });

  it('linearSwiglu checks x and gateUp', () => {
    expectQkError(
      () => linearSwiglu(x, weights(6, 9, 'f32', 33_411)),
      QkShapeError,
      'QK_SHAPE',
      'linearSwiglu:',
      '"gateUp"',
    );
    expectQkError(
      () => linearSwiglu(x, weights(6, 8, 'bf16', 33_412) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'linearSwiglu:',
      '"gateUp"',
    );
    expectQkError(() => linearSwiglu(x, randn([8], 'f32', 33_413)), QkShapeError, 'QK_SHAPE', '"gateUp"');
    expectQkError(
      () => linearSwiglu(Tensor.fromArray(2) as Tensor<'f32'>, w),
      QkShapeError,
      'QK_SHAPE',
      'linearSwiglu:',
      '"x"',
    );
    const ints = Tensor.fromArray(new Array(24).fill(1), { shape: [3, 8], dtype: 'i32' });
    expectQkError(
      () => linearSwiglu(ints as unknown as Tensor<'f32'>, w),
      QkDtypeError,
      'QK_DTYPE',
      'linearSwiglu:',
      '"x"',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// CUDA against the CPU reference (the kernels' full sweep is in the verify cases, cuda-verify.test.ts).
// ---------------------------------------------------------------------------------------------------------

const gpu = cudaAvailable();

describe(`rmsnormLinear / linearSwiglu on CUDA (${gpu ? 'GPU present' : `skipped: ${cudaStatus().reason}`})`, () => {
  // Rows on each side of the fused kernels' limits: 8 without a norm, 64 with one.
  const ROWS = [1, 8, 9, 64, 65];

  it.skipIf(!gpu).each(FLOAT_DTYPES.flatMap((dtype) => ROWS.map((m) => ({ dtype, m }))))(
    '$dtype M=$m: residual + swiglu and linearSwiglu match the reference',
    ({ dtype, m }) => {
      const seed = 34_000 + FLOAT_DTYPES.indexOf(dtype) * 100 + m;
      const [k, f] = [333, 77];
      const x = randn([m, k], dtype, seed);
      const r = randn([m, k], dtype, seed + 1);
      const g = gains(k, dtype, seed + 2);
      const w = weights(2 * f, k, dtype, seed + 3);
      const sum = Tensor.empty([m, k], dtype);
      const expected = rmsnormLinear(x, g, w, { residual: r, residualOut: sum, glu: 'swiglu' });
      const [gx, gr, gg, gw] = [x, r, g, w].map((t) => t.to('cuda')) as [
        Tensor<typeof dtype>,
        Tensor<typeof dtype>,
        Tensor<typeof dtype>,
        Tensor<typeof dtype>,
      ];
      const out = Tensor.full([m, f], Number.NaN, dtype).to('cuda');
      const residualOut = Tensor.full([m, k], Number.NaN, dtype).to('cuda');
      rmsnormLinear(gx, gg, gw, { residual: gr, residualOut, out, glu: 'swiglu' });
      assertClose(out.to('cpu'), expected, { op: 'rmsnormLinear', dtype });
      expect(sameBits(residualOut.toArray(), sum.toArray())).toBe(true);
      assertClose(linearSwiglu(gx, gw).to('cpu'), linearSwiglu(x, w), { op: 'linearSwiglu', dtype });
      assertClose(
        rmsnormLinear(gx, gg, gw, { residual: gr }).to('cpu'),
        rmsnormLinear(x, g, w, { residual: r }),
        {
          op: 'rmsnormLinear',
          dtype,
        },
      );
      for (const t of [gx, gr, gg, gw, out, residualOut]) t.dispose();
    },
  );

  it.skipIf(!gpu)('refuses a residualOut that overlaps x or residual on the GPU', () => {
    const buffer = randn([5, 64], 'bf16', 34_900).to('cuda');
    const [x, overlapping] = [buffer.slice(0, 4), buffer.slice(1, 5)];
    const r = randn([4, 64], 'bf16', 34_901).to('cuda');
    const g = gains(64, 'bf16', 34_902).to('cuda');
    const w = weights(32, 64, 'bf16', 34_903).to('cuda');
    for (const residualOut of [overlapping, r]) {
      expectQkError(
        () => rmsnormLinear(x, g, w, { residual: r, residualOut, glu: 'swiglu' }),
        QkValueError,
        'QK_VALUE',
        '"residualOut"',
        'shares memory',
      );
    }
  });
});
