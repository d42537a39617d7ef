/**
 * rmsnorm, fusedAddRmsnorm and qkNorm against a float64 oracle written here: y = x·w / sqrt(mean(x²) + eps) over
 * the last axis, computed from the (already rounded) inputs and rounded once to the dtype.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RMS_EPS,
  type FloatDType,
  fusedAddRmsnorm,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  qkNorm,
  rmsnorm,
  roundToDType,
  type Shape,
  Tensor,
} from '../src/index.js';
import { expectNear, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn, roundAll } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. The op and the oracle both sum in float64 (relative error ~n·2^-53, far
// below any output step) and round once, so elementwise they differ by at most one step of the output grid.
// Relative L2: f32 keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11), bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

/** float64 RMSNorm of each length-n row of x: x·w / sqrt(Σx²/n + eps). */
function rmsnormRef(x: ArrayLike<number>, w: ArrayLike<number>, n: number, eps: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let base = 0; base < x.length; base += n) {
    let sumSq = 0;
    for (let i = 0; i < n; i++) sumSq += x[base + i]! * x[base + i]!;
    const rms = Math.sqrt(sumSq / n + eps);
    for (let i = 0; i < n; i++) out[base + i] = (x[base + i]! * w[i]!) / rms;
  }
  return out;
}

const SIZES = [...ODD_SIZES, 1024, 4096] as const;
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SIZES.map((n, s) => ({ dtype, n, seed: 20_000 + 100 * d + s })),
);
const BAD_EPS: unknown[] = [0, -1e-6, Number.NaN, Number.POSITIVE_INFINITY, '1e-6'];

function intTensor(shape: Shape): Tensor<'f32'> {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(
    Array.from({ length: n }, (_, i) => i + 1),
    { shape, dtype: 'i32' },
  ) as unknown as Tensor<'f32'>;
}

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

/** Weights drawn around 1 as trained RMSNorm weights are, but random per element. */
function weight<D extends FloatDType>(n: number, dtype: D, seed: number): Tensor<D> {
  return Tensor.randn([n], { dtype, seed, mean: 1, std: 0.5 });
}

// ---------------------------------------------------------------------------------------------------------
describe('rmsnorm', () => {
  it.each(CASES)('$dtype [3, $n] matches x·w/sqrt(mean(x²) + eps) rounded once', ({ dtype, n, seed }) => {
    const x = randn([3, n], dtype, seed);
    const w = weight(n, dtype, seed + 50);
    const [bx, bw] = [x.toArray(), w.toArray()];
    const y = rmsnorm(x, w);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expect(y.data).not.toBe(x.data);
    expectNear(y, roundAll(rmsnormRef(f64(x), f64(w), n, DEFAULT_RMS_EPS), dtype), dtype);
    expect(x.toArray()).toEqual(bx);
    expect(w.toArray()).toEqual(bw);
  });

  it.each(FLOAT_DTYPES)('%s: rank 1 and rank 3 inputs, and a custom eps', (dtype) => {
    const seed = 20_500 + 10 * FLOAT_DTYPES.indexOf(dtype);
    const v = randn([111], dtype, seed, 0.01); // mean square ~1e-4: eps = 1e-3 dominates it
    const wv = weight(111, dtype, seed + 1);
    expectNear(rmsnorm(v, wv, { eps: 1e-3 }), roundAll(rmsnormRef(f64(v), f64(wv), 111, 1e-3), dtype), dtype);
    const x = randn([2, 5, 1024], dtype, seed + 2, 4);
    const w = weight(1024, dtype, seed + 3);
    const y = rmsnorm(x, w, { eps: 1e-5 });
    expect(y.shape).toEqual([2, 5, 1024]);
    expectNear(y, roundAll(rmsnormRef(f64(x), f64(w), 1024, 1e-5), dtype), dtype);
  });

  it.each(FLOAT_DTYPES)('%s: a constant row c with weight 1 gives sign(c)·|c|/sqrt(c² + eps)', (dtype) => {
    const cases = [
      { c: 0.75, eps: 0.4375, y: 0.75 }, // c² + eps = 1
      { c: -2, eps: 5, y: -2 / 3 }, // c² + eps = 9
      { c: 2 ** -10, eps: 2 ** -20, y: Math.SQRT1_2 }, // c² = eps
      { c: 3, eps: DEFAULT_RMS_EPS, y: 3 / Math.sqrt(9 + 1e-6) },
    ];
    for (const { c, eps, y } of cases) {
      const x = Tensor.full([2, 7], c, dtype);
      const out = rmsnorm(x, Tensor.ones([7], dtype), { eps }).toArray();
      expect(out).toEqual(new Array(14).fill(roundToDType(y, dtype)));
      // Weight 2 doubles the result (exact in binary).
      expect(rmsnorm(x, Tensor.full([7], 2, dtype), { eps }).toArray()).toEqual(
        new Array(14).fill(roundToDType(2 * y, dtype)),
      );
    }
  });

  it('alternating ±1 with eps = 3 gives ±1/2; per-element weights scale each column', () => {
    // mean(x²) = 1, sqrt(1 + 3) = 2.
    const x = Tensor.fromArray([1, -1, 1, -1]);
    expect(rmsnorm(x, Tensor.ones([4]), { eps: 3 }).toArray()).toEqual([0.5, -0.5, 0.5, -0.5]);
    expect(rmsnorm(x, Tensor.fromArray([1, 2, -4, 0.25]), { eps: 3 }).toArray()).toEqual([
      0.5, -1, -2, -0.125,
    ]);
  });

  it('sums squares without overflowing f16: a row of 60000 normalises to 1', () => {
    const x = Tensor.full([1, 64], 60000, 'f16');
    expect(rmsnorm(x, Tensor.ones([64], 'f16')).toArray()).toEqual(new Array(64).fill(1));
  });

  it.each(FLOAT_DTYPES)('%s: a NaN poisons its own row only', (dtype) => {
    const vals = randn([2, 9], dtype, 20_600 + FLOAT_DTYPES.indexOf(dtype)).toArray();
    vals[3] = Number.NaN;
    const x = Tensor.fromArray(vals, { shape: [2, 9], dtype });
    const w = weight(9, dtype, 20_610 + FLOAT_DTYPES.indexOf(dtype));
    const y = rmsnorm(x, w).toArray();
    for (let i = 0; i < 9; i++) expect(y[i]).toBeNaN();
    const expected = roundAll(rmsnormRef(vals.slice(9), f64(w), 9, DEFAULT_RMS_EPS), dtype);
    expect(y.slice(9)).toEqual(Array.from(expected));
  });

  it('validates its arguments', () => {
    const x = randn([3, 8], 'f32', 20_700);
    const w = weight(8, 'f32', 20_701);
    expectQkError(
      () => rmsnorm(x, weight(7, 'f32', 20_702)),
      QkShapeError,
      'QK_SHAPE',
      'rmsnorm:',
      '"weight"',
      '[7]',
    );
    expectQkError(
      () => rmsnorm(x, weight(9, 'f32', 20_703)),
      QkShapeError,
      'QK_SHAPE',
      'rmsnorm:',
      '"weight"',
    );
    expectQkError(
      () => rmsnorm(x, randn([1, 8], 'f32', 20_704)),
      QkShapeError,
      'QK_SHAPE',
      'rmsnorm:',
      '"weight"',
    );
    expectQkError(
      () => rmsnorm(x, weight(8, 'bf16', 20_705) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnorm:',
      '"weight"',
      'bf16',
    );
    expectQkError(() => rmsnorm(intTensor([3, 8]), w), QkDtypeError, 'QK_DTYPE', 'rmsnorm:', '"x"', 'i32');
    expectQkError(() => rmsnorm(x, intTensor([8])), QkDtypeError, 'QK_DTYPE', 'rmsnorm:', '"weight"', 'i32');
    expectQkError(() => rmsnorm(Tensor.fromArray(2), w), QkShapeError, 'QK_SHAPE', 'rmsnorm:', '"x"');
    for (const eps of BAD_EPS) {
      expectQkError(
        () => rmsnorm(x, w, { eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        'rmsnorm:',
        '"eps"',
      );
    }
    expectQkError(
      () => rmsnorm(disposed(randn([3, 8], 'f32', 20_706)), w),
      QkDisposedError,
      'QK_DISPOSED',
      'rmsnorm (argument "x")',
    );
    expectQkError(
      () => rmsnorm(x, disposed(weight(8, 'f32', 20_707))),
      QkDisposedError,
      'QK_DISPOSED',
      'rmsnorm (argument "weight")',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('fusedAddRmsnorm', () => {
  it.each(CASES)(
    '$dtype [3, $n]: residual = round(x + r) exactly, out = rmsnorm of it',
    ({ dtype, n, seed }) => {
      const x = randn([3, n], dtype, seed + 1000);
      const r = randn([3, n], dtype, seed + 1001, 8);
      const w = weight(n, dtype, seed + 1002);
      const before = [x.toArray(), r.toArray(), w.toArray()];
      const xs = f64(x);
      const rs = f64(r);
      const h = roundAll(
        Array.from(xs, (v, i) => v + rs[i]!),
        dtype,
      );
      const res = fusedAddRmsnorm(x, r, w);
      for (const t of [res.out, res.residual]) {
        expect(t.shape).toEqual([3, n]);
        expect(t.dtype).toBe(dtype);
        expect(t.data).not.toBe(x.data);
        expect(t.data).not.toBe(r.data);
      }
      expect(res.residual.toArray()).toEqual(Array.from(h));
      expectNear(res.out, roundAll(rmsnormRef(h, f64(w), n, DEFAULT_RMS_EPS), dtype), dtype);
      expect([x.toArray(), r.toArray(), w.toArray()]).toEqual(before);
    },
  );

  it.each(FLOAT_DTYPES)('%s: rank 3 hidden states [2, 5, 4096] with eps 1e-5', (dtype) => {
    const seed = 21_500 + 10 * FLOAT_DTYPES.indexOf(dtype);
    const x = randn([2, 5, 4096], dtype, seed, 2);
    const r = randn([2, 5, 4096], dtype, seed + 1, 2);
    const w = weight(4096, dtype, seed + 2);
    const rs = f64(r);
    const h = roundAll(
      Array.from(f64(x), (v, i) => v + rs[i]!),
      dtype,
    );
    const res = fusedAddRmsnorm(x, r, w, { eps: 1e-5 });
    expect(res.out.shape).toEqual([2, 5, 4096]);
    expect(res.residual.toArray()).toEqual(Array.from(h));
    expectNear(res.out, roundAll(rmsnormRef(h, f64(w), 4096, 1e-5), dtype), dtype);
  });

  it('rounds the sum once to the dtype (bf16: 1 + 2^-8 ties to 1, 1 + 3·2^-8 to 1 + 2^-6)', () => {
    const x = Tensor.fromArray([1, 1], { dtype: 'bf16' });
    const r = Tensor.fromArray([2 ** -8, 3 * 2 ** -8], { dtype: 'bf16' });
    const { residual, out } = fusedAddRmsnorm(x, r, Tensor.ones([2], 'bf16'), { eps: 1 });
    expect(residual.toArray()).toEqual([1, 1 + 2 ** -6]);
    const h = [1, 1 + 2 ** -6];
    const rms = Math.sqrt((h[0]! ** 2 + h[1]! ** 2) / 2 + 1);
    expect(out.toArray()).toEqual(h.map((v) => roundToDType(v / rms, 'bf16')));
  });

  it.each(FLOAT_DTYPES)('%s: a NaN in x or residual poisons its row of both outputs', (dtype) => {
    const xv = randn([2, 7], dtype, 21_600 + FLOAT_DTYPES.indexOf(dtype)).toArray();
    const rv = randn([2, 7], dtype, 21_610 + FLOAT_DTYPES.indexOf(dtype)).toArray();
    xv[2] = Number.NaN;
    rv[12] = Number.NaN;
    const x = Tensor.fromArray(xv, { shape: [2, 7], dtype });
    const r = Tensor.fromArray(rv, { shape: [2, 7], dtype });
    const { out, residual } = fusedAddRmsnorm(x, r, weight(7, dtype, 21_620));
    expect(residual.toArray()[2]).toBeNaN();
    expect(residual.toArray()[12]).toBeNaN();
    for (const v of out.toArray()) expect(v).toBeNaN();
  });

  it('validates its arguments', () => {
    const x = randn([3, 8], 'f32', 21_700);
    const r = randn([3, 8], 'f32', 21_701);
    const w = weight(8, 'f32', 21_702);
    const op = 'fusedAddRmsnorm:';
    expectQkError(
      () => fusedAddRmsnorm(x, r, weight(7, 'f32', 21_703)),
      QkShapeError,
      'QK_SHAPE',
      op,
      '"weight"',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, r, randn([8, 1], 'f32', 21_704)),
      QkShapeError,
      'QK_SHAPE',
      op,
      '"weight"',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, r, randn([1, 8], 'f32', 21_705)),
      QkShapeError,
      'QK_SHAPE',
      op,
      '"weight"',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, randn([3, 7], 'f32', 21_706), w),
      QkShapeError,
      'QK_SHAPE',
      op,
      '"residual"',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, randn([8, 3], 'f32', 21_707), w),
      QkShapeError,
      'QK_SHAPE',
      op,
      '"residual"',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, randn([3, 8], 'f16', 21_708) as unknown as Tensor<'f32'>, w),
      QkDtypeError,
      'QK_DTYPE',
      op,
      '"residual"',
      'f16',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, r, weight(8, 'bf16', 21_709) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      op,
      '"weight"',
      'bf16',
    );
    expectQkError(() => fusedAddRmsnorm(intTensor([3, 8]), r, w), QkDtypeError, 'QK_DTYPE', op, '"x"');
    expectQkError(() => fusedAddRmsnorm(x, intTensor([3, 8]), w), QkDtypeError, 'QK_DTYPE', op, '"residual"');
    expectQkError(() => fusedAddRmsnorm(x, r, intTensor([8])), QkDtypeError, 'QK_DTYPE', op, '"weight"');
    for (const eps of BAD_EPS) {
      expectQkError(
        () => fusedAddRmsnorm(x, r, w, { eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        op,
        '"eps"',
      );
    }
    expectQkError(
      () => fusedAddRmsnorm(disposed(randn([3, 8], 'f32', 21_710)), r, w),
      QkDisposedError,
      'QK_DISPOSED',
      'fusedAddRmsnorm (argument "x")',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, disposed(randn([3, 8], 'f32', 21_711)), w),
      QkDisposedError,
      'QK_DISPOSED',
      'fusedAddRmsnorm (argument "residual")',
    );
    expectQkError(
      () => fusedAddRmsnorm(x, r, disposed(weight(8, 'f32', 21_712))),
      QkDisposedError,
      'QK_DISPOSED',
      'fusedAddRmsnorm (argument "weight")',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
const QK_SHAPES: { shape: number[]; label: string }[] = [
  { shape: [3, 16, 128], label: 'Qwen3 q: 16 heads × 128' },
  { shape: [2, 32, 128], label: 'Qwen3 q: 32 heads × 128' },
  { shape: [5, 8, 128], label: 'Qwen3 k: 8 KV heads × 128' },
  { shape: [2, 2, 4, 128], label: 'rank 4 [batch, tokens, heads, headDim]' },
  ...ODD_SIZES.map((d) => ({ shape: [2, 3, d], label: `odd headDim ${d}` })),
];
const QK_CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  QK_SHAPES.map(({ shape, label }, s) => ({ dtype, shape, label, seed: 22_000 + 100 * d + s })),
);

describe('qkNorm', () => {
  it.each(QK_CASES)('$dtype $shape ($label): each head vector normalised with a shared weight', (c) => {
    const { dtype, shape, seed } = c;
    const headDim = shape[shape.length - 1]!;
    const x = randn(shape, dtype, seed, 3);
    const w = weight(headDim, dtype, seed + 50);
    const [bx, bw] = [x.toArray(), w.toArray()];
    const y = qkNorm(x, w);
    expect(y.shape).toEqual(shape);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(rmsnormRef(f64(x), f64(w), headDim, DEFAULT_RMS_EPS), dtype), dtype);
    expect(x.toArray()).toEqual(bx);
    expect(w.toArray()).toEqual(bw);
  });

  it('honours eps and keeps heads independent (a constant head is ±c/sqrt(c² + eps))', () => {
    // Head 0 is all 0.75 and head 1 all −2; eps 0.4375 gives 0.75/1 and −2/sqrt(4.4375).
    const x = Tensor.fromArray([[new Array(4).fill(0.75), new Array(4).fill(-2)]]);
    const y = qkNorm(x, Tensor.ones([4]), { eps: 0.4375 }).toArray();
    expect(y).toEqual([
      ...new Array(4).fill(0.75),
      ...new Array(4).fill(Math.fround(-2 / Math.sqrt(4.4375))),
    ]);
  });

  it('propagates NaN within its head only', () => {
    const vals = randn([1, 2, 6], 'bf16', 22_600).toArray();
    vals[7] = Number.NaN;
    const x = Tensor.fromArray(vals, { shape: [1, 2, 6], dtype: 'bf16' });
    const w = weight(6, 'bf16', 22_601);
    const y = qkNorm(x, w).toArray();
    for (let i = 6; i < 12; i++) expect(y[i]).toBeNaN();
    expect(y.slice(0, 6)).toEqual(
      Array.from(roundAll(rmsnormRef(vals.slice(0, 6), f64(w), 6, 1e-6), 'bf16')),
    );
  });

  it('validates its arguments', () => {
    const x = randn([2, 4, 16], 'f32', 22_700);
    const w = weight(16, 'f32', 22_701);
    expectQkError(
      () => qkNorm(x, weight(4, 'f32', 22_702)),
      QkShapeError,
      'QK_SHAPE',
      'qkNorm:',
      '"weight"',
      '[16]',
    );
    expectQkError(
      () => qkNorm(x, weight(15, 'f32', 22_703)),
      QkShapeError,
      'QK_SHAPE',
      'qkNorm:',
      '"weight"',
    );
    expectQkError(() => qkNorm(randn([16], 'f32', 22_704), w), QkShapeError, 'QK_SHAPE', 'qkNorm:', '"x"');
    expectQkError(
      () => qkNorm(x, weight(16, 'f16', 22_705) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'qkNorm:',
      '"weight"',
      'f16',
    );
    expectQkError(() => qkNorm(intTensor([2, 4, 16]), w), QkDtypeError, 'QK_DTYPE', 'qkNorm:', '"x"');
    expectQkError(() => qkNorm(x, intTensor([16])), QkDtypeError, 'QK_DTYPE', 'qkNorm:', '"weight"');
    for (const eps of BAD_EPS) {
      expectQkError(() => qkNorm(x, w, { eps: eps as number }), QkValueError, 'QK_VALUE', 'qkNorm:', '"eps"');
    }
    expectQkError(
      () => qkNorm(disposed(randn([2, 4, 16], 'f32', 22_706)), w),
      QkDisposedError,
      'QK_DISPOSED',
      'qkNorm (argument "x")',
    );
    expectQkError(
      () => qkNorm(x, disposed(weight(16, 'f32', 22_707))),
      QkDisposedError,
      'QK_DISPOSED',
      'qkNorm (argument "weight")',
    );
  });
});
