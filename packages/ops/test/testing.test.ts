/**
 * `@qk/ops/testing`: `closeness`, `assertClose` and the tolerance table. Expected measures are recomputed here
 * in plain float64; messages are checked for the facts a reader needs (which bound, which indices, which values).
 */
import { describe, expect, it } from 'vitest';
import { FLOAT_DTYPES, QkAssertionError, QkError, QkValueError, Tensor } from '../src/index.js';
import {
  assertClose,
  closeness,
  QkAssertionError as TestingAssertionError,
  TOLERANCES,
  type ToleranceOp,
  toleranceFor,
} from '../src/testing/index.js';
import { expectQkError } from './helpers.js';

/** Every member of `ToleranceOp`: the Record type makes the compiler reject a missing or extra op. */
const ALL_OPS: Record<ToleranceOp, true> = {
  rmsnorm: true,
  fusedAddRmsnorm: true,
  qkNorm: true,
  qkNormRope: true,
  qkNormRopeAppend: true,
  rmsnormEager: true,
  swigluEager: true,
  rope: true,
  silu: true,
  gelu: true,
  swiglu: true,
  add: true,
  mul: true,
  linear: true,
  embedding: true,
  softmax: true,
  attention: true,
  linearInt8: true,
  linearInt4: true,
  rmsnormLinear: true,
  linearSwiglu: true,
  quantizeInt8: true,
  quantizeInt4: true,
  argmax: true,
  findNonFinite: true,
  sample: true,
  applyLogitControls: true,
};
const OPS = Object.keys(ALL_OPS) as ToleranceOp[];
const EXACT_OPS = new Set<ToleranceOp>([
  'embedding',
  'quantizeInt8',
  'quantizeInt4',
  'argmax',
  'findNonFinite',
  'sample',
  'applyLogitControls',
]);

function ownMeasures(
  a: ArrayLike<number>,
  e: ArrayLike<number>,
): { relL2: number; maxAbs: number; at: number } {
  let d2 = 0;
  let r2 = 0;
  let maxAbs = -1;
  let at = -1;
  for (let i = 0; i < e.length; i++) {
    const d = Math.abs(a[i]! - e[i]!);
    d2 += d * d;
    r2 += e[i]! * e[i]!;
    if (d > maxAbs) {
      maxAbs = d;
      at = i;
    }
  }
  return { relL2: r2 > 0 ? Math.sqrt(d2 / r2) : Math.sqrt(d2), maxAbs, at };
}

function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

describe('closeness', () => {
  it('is zero for an exact match', () => {
    const t = Tensor.randn([4, 5], { seed: 1 });
    const c = closeness(t, t.clone());
    expect(c).toEqual({ relL2: 0, maxAbs: 0, maxAbsIndex: 0, nonFiniteMismatches: [], count: 20 });
    expect(assertClose(t, t.clone(), { rtol: 0, atol: 0 }).relL2).toBe(0);
  });

  it('computes relative L2 and max-abs like a direct float64 computation', () => {
    const next = xorshift32(7);
    for (const n of [1, 5, 100, 1000]) {
      const e = Float64Array.from({ length: n }, () => next() * 4 - 2);
      const a = e.map((v) => v + (next() - 0.5) * 1e-3);
      const own = ownMeasures(a, e);
      const c = closeness(a, e);
      expect(c.relL2).toBeCloseTo(own.relL2, 14);
      expect(Math.abs(c.relL2 - own.relL2)).toBeLessThanOrEqual(1e-12 * own.relL2);
      expect(c.maxAbs).toBe(own.maxAbs);
      expect(c.maxAbsIndex).toBe(own.at);
      expect(c.count).toBe(n);
    }
  });

  it('hand-computed example', () => {
    // diff = [0, 0.5, -1, 0] → ‖diff‖ = √1.25; ‖expected‖ = √(1 + 4 + 9 + 16) = √30
    const c = closeness([1, 2.5, 2, 4], [1, 2, 3, 4]);
    expect(c.relL2).toBeCloseTo(Math.sqrt(1.25 / 30), 15);
    expect(c.maxAbs).toBe(1);
    expect(c.maxAbsIndex).toBe(2);
  });

  it('uses the absolute L2 norm when expected is all zero', () => {
    const c = closeness([3, 4], [0, 0]);
    expect(c.relL2).toBe(5);
    expect(c.maxAbs).toBe(4);
  });

  it('reads tensors of any dtype exactly and compares them with arrays', () => {
    const bf = Tensor.fromArray([1 / 3, 2, -0.5], { dtype: 'bf16' });
    // bf16 1/3 is 171/512
    expect(closeness(bf, [171 / 512, 2, -0.5]).maxAbs).toBe(0);
    const i8 = Tensor.fromArray([1, -2, 3], { dtype: 'i8' });
    expect(closeness(i8, [1, -2, 4]).maxAbs).toBe(1);
  });

  it('lists non-finite mismatches: NaN vs number, +inf vs -inf, number vs inf; same non-finite is fine', () => {
    const actual = [Number.NaN, Number.NaN, Infinity, Infinity, -Infinity, 1, 2, Infinity];
    const expected = [1, Number.NaN, -Infinity, Infinity, -Infinity, Infinity, Number.NaN, Number.NaN];
    const c = closeness(actual, expected);
    expect(c.nonFiniteMismatches).toEqual([0, 2, 5, 6, 7]);
    expect(c.maxAbs).toBe(0); // no finite pair differs
  });

  it('reports shape and length mismatches', () => {
    expectQkError(
      () => closeness(Tensor.zeros([2, 3]), Tensor.zeros([3, 2])),
      QkAssertionError,
      'QK_ASSERTION',
      'shapes differ',
      '[2, 3]',
      '[3, 2]',
    );
    expectQkError(
      () => closeness([1, 2, 3], [1, 2]),
      QkAssertionError,
      'QK_ASSERTION',
      'lengths differ',
      '3',
      '2',
    );
    expectQkError(
      () => assertClose(Tensor.zeros([4]), [0, 0, 0], { rtol: 1, atol: 1 }),
      QkAssertionError,
      'QK_ASSERTION',
      'lengths differ',
      '4',
      '3',
    );
    expectQkError(
      () => closeness(null as unknown as number[], [1]),
      QkAssertionError,
      'QK_ASSERTION',
      '"actual"',
      'Tensor',
    );
  });
});

describe('assertClose', () => {
  it('enforces rtol on its own', () => {
    // every element off by 1%: relative L2 = 0.01 exactly in real arithmetic, max abs 0.01
    const e = [1, 1, 1, 1];
    const a = [1.01, 1.01, 1.01, 1.01];
    expect(() => assertClose(a, e, { rtol: 0.02, atol: 0.1 })).not.toThrow();
    const err = expectQkError(
      () => assertClose(a, e, { rtol: 0.005, atol: 0.1 }),
      QkAssertionError,
      'QK_ASSERTION',
      'relative L2',
      'rtol 0.005',
    );
    expect(err.message).not.toContain('max abs');
    // no element breaks atol, so no index is blamed
    expect(err.message).toContain('none beyond the L2 bound');
  });

  it('enforces atol on its own', () => {
    // one element off by 0.5 against a large reference: relative L2 = 0.5 / 100 = 0.005
    const e = [100, 0, 0, 0];
    const a = [100, 0, 0.5, 0];
    expect(() => assertClose(a, e, { rtol: 0.01, atol: 1 })).not.toThrow();
    const err = expectQkError(
      () => assertClose(a, e, { rtol: 0.01, atol: 0.1 }),
      QkAssertionError,
      'QK_ASSERTION',
      'max abs',
      'at [2]',
      'atol 0.1',
      '[2] actual 0.5 expected 0',
    );
    expect(err.message).not.toContain('relative L2');
  });

  it('accepts differences equal to the bounds', () => {
    // |diff| = 0.5 = atol; relative L2 = 0.5 / 2 = 0.25 = rtol (all exact in binary)
    expect(() => assertClose([2.5], [2], { rtol: 0.25, atol: 0.5 })).not.toThrow();
    expect(() => assertClose([2.5], [2], { rtol: 0.25, atol: 0.4375 })).toThrow(QkAssertionError);
    expect(() => assertClose([2.5], [2], { rtol: 0.1875, atol: 0.5 })).toThrow(QkAssertionError);
  });

  it('fails on NaN vs number and +inf vs -inf; passes NaN vs NaN and equal infinities', () => {
    const loose = { rtol: 1e9, atol: 1e9 };
    expect(() => assertClose([Number.NaN, 1], [Number.NaN, 1], loose)).not.toThrow();
    expect(() => assertClose([Infinity, -Infinity], [Infinity, -Infinity], loose)).not.toThrow();
    expectQkError(
      () => assertClose([1, Number.NaN], [1, 2], loose),
      QkAssertionError,
      'QK_ASSERTION',
      '1 NaN/inf mismatches',
      '[1] actual NaN expected 2',
    );
    expectQkError(
      () => assertClose([2, 1], [Number.NaN, 1], loose),
      QkAssertionError,
      'QK_ASSERTION',
      '[0] actual 2 expected NaN',
    );
    expectQkError(
      () => assertClose([Infinity], [-Infinity], loose),
      QkAssertionError,
      'QK_ASSERTION',
      '[0] actual Infinity expected -Infinity',
    );
    expectQkError(() => assertClose([Infinity], [1e30], loose), QkAssertionError, 'QK_ASSERTION', 'NaN/inf');
    // tensors too: bf16 NaN against f32 NaN
    const nanBf16 = Tensor.fromArray([Number.NaN, 1], { dtype: 'bf16' });
    expect(() => assertClose(nanBf16, [Number.NaN, 1], { rtol: 0, atol: 0 })).not.toThrow();
  });

  it('lists the first bad indices in order, with their values, at most eight', () => {
    const n = 40;
    const e = new Array<number>(n).fill(0);
    const a = new Array<number>(n).fill(0);
    a[3] = 5;
    a[7] = -7;
    // ten NaN mismatches after them, and more atol breaks at the end
    for (let i = 20; i < 30; i++) a[i] = Number.NaN;
    for (let i = 30; i < 40; i++) a[i] = 1;
    const err = expectQkError(
      () => assertClose(a, e, { rtol: 1e9, atol: 0.5 }),
      QkAssertionError,
      'QK_ASSERTION',
      `values not close (${n} elements)`,
      '10 NaN/inf mismatches',
      'max abs 7.000e+0 at [7]',
    );
    const listed = [...err.message.matchAll(/\[(\d+)\] actual (\S+) expected (\S+?)[;.]/g)].map((m) => [
      Number(m[1]),
      m[2],
      m[3],
    ]);
    expect(listed).toEqual([
      [3, '5', '0'],
      [7, '-7', '0'],
      [20, 'NaN', '0'],
      [21, 'NaN', '0'],
      [22, 'NaN', '0'],
      [23, 'NaN', '0'],
      [24, 'NaN', '0'],
      [25, 'NaN', '0'],
    ]);
  });

  it('names the label and reports a tensor shape mismatch', () => {
    expectQkError(
      () => assertClose([1], [2], { rtol: 0, atol: 0 }, 'logits'),
      QkAssertionError,
      'QK_ASSERTION',
      'logits not close (1 elements)',
    );
    expectQkError(
      () => assertClose(Tensor.zeros([2, 2]), Tensor.zeros([4]), { rtol: 1, atol: 1 }),
      QkAssertionError,
      'QK_ASSERTION',
      'shapes differ',
      '[2, 2]',
      '[4]',
    );
  });

  it('throws QkAssertionError, a QkError with code QK_ASSERTION, re-exported by the testing entry point', () => {
    expect(TestingAssertionError).toBe(QkAssertionError);
    let caught: unknown;
    try {
      assertClose([1], [2], { rtol: 0, atol: 0 });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(QkAssertionError);
    expect(caught).toBeInstanceOf(QkError);
    expect((caught as QkError).code).toBe('QK_ASSERTION');
    expect((caught as QkError).name).toBe('QkAssertionError');
  });

  it('looks tolerances up by { op, dtype }', () => {
    // rmsnorm uses the reduction bounds: a 0.09 error passes bf16 (atol 0.1) and fails f32
    const e = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((v) => v * 10);
    const a = e.map((v, i) => (i === 4 ? v + 0.09 : v));
    const bf = toleranceFor('rmsnorm', 'bf16');
    expect(bf.atol).toBeGreaterThan(0.09);
    expect(() => assertClose(a, e, { op: 'rmsnorm', dtype: 'bf16' })).not.toThrow();
    expectQkError(
      () => assertClose(a, e, { op: 'rmsnorm', dtype: 'f32' }),
      QkAssertionError,
      'QK_ASSERTION',
      `atol ${toleranceFor('rmsnorm', 'f32').atol}`,
    );
    // embedding is exact: any difference fails
    expect(() => assertClose([1], [1], { op: 'embedding', dtype: 'bf16' })).not.toThrow();
    expect(() => assertClose([1], [1 + 2 ** -20], { op: 'embedding', dtype: 'bf16' })).toThrow(
      QkAssertionError,
    );
  });
});

describe('tolerance table', () => {
  it('has exactly the ops of ToleranceOp, each with every float dtype', () => {
    expect(Object.keys(TOLERANCES).sort()).toEqual([...OPS].sort());
    for (const op of OPS) {
      expect(Object.keys(TOLERANCES[op]).sort()).toEqual([...FLOAT_DTYPES].sort());
      for (const dtype of FLOAT_DTYPES) {
        const t = toleranceFor(op, dtype);
        expect(t).toBe(TOLERANCES[op][dtype]);
        expect(Number.isFinite(t.rtol) && t.rtol >= 0, `${op} ${dtype} rtol`).toBe(true);
        expect(Number.isFinite(t.atol) && t.atol >= 0, `${op} ${dtype} atol`).toBe(true);
      }
    }
  });

  it('is looser for bf16 than f16, and for f16 than f32 (equal only where both are zero)', () => {
    const looser = (a: number, b: number) => a > b || (a === 0 && b === 0);
    for (const op of OPS) {
      const { f32, f16, bf16 } = TOLERANCES[op];
      for (const key of ['rtol', 'atol'] as const) {
        expect(looser(f16[key], f32[key]), `${op} ${key}: f16 ${f16[key]} vs f32 ${f32[key]}`).toBe(true);
        expect(looser(bf16[key], f16[key]), `${op} ${key}: bf16 ${bf16[key]} vs f16 ${f16[key]}`).toBe(true);
      }
    }
  });

  it('admits one correctly rounded output: rtol at least the unit roundoff 2^-p of the format', () => {
    // p significant bits (stored + implicit): bf16 8, f16 11, f32 24. A once-rounded vector has relative L2 ≤ 2^-p.
    const unitRoundoff = { bf16: 2 ** -8, f16: 2 ** -11, f32: 2 ** -24 };
    for (const op of OPS) {
      // Exact by definition: a gather copies values, quantizer codes and argmax/sample ids are integers.
      if (EXACT_OPS.has(op)) continue;
      for (const dtype of FLOAT_DTYPES) {
        expect(TOLERANCES[op][dtype].rtol, `${op} ${dtype}`).toBeGreaterThanOrEqual(unitRoundoff[dtype]);
      }
    }
  });

  it('is frozen, and an unknown op or dtype is a QkValueError naming it', () => {
    expect(Object.isFrozen(TOLERANCES)).toBe(true);
    expectQkError(
      () => toleranceFor('nope' as ToleranceOp, 'f32'),
      QkValueError,
      'QK_VALUE',
      'toleranceFor',
      'nope',
    );
    expectQkError(
      () => toleranceFor('rmsnorm', 'f64' as 'f32'),
      QkValueError,
      'QK_VALUE',
      'toleranceFor',
      'f64',
    );
  });
});
