import { describe, expect, it } from 'vitest';
import {
  DEFAULT_INT4_GROUP,
  dequantizeInt4,
  dequantizeInt8,
  type Int4Weight,
  type Int8Weight,
  linearInt4,
  linearInt8,
  packInt4,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  quantizeInt4,
  quantizeInt8,
  type Shape,
  Tensor,
  unpackInt4,
} from '../src/index.js';
import {
  compare,
  expectMatches,
  expectQkError,
  FLOAT_DTYPES,
  f64,
  randn,
  roundAll,
  sameBits,
} from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Independent oracles.
// ---------------------------------------------------------------------------------------------------------

/** Round half to even, from floor and the (exact) fractional part. */
function rhe(x: number): number {
  const f = Math.floor(x);
  const frac = x - f;
  if (frac > 0.5) return f + 1;
  if (frac < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Symmetric quantization of consecutive groups of `groupSize` values of each row: scale = max|group| / qmax stored
 * as float32, q = clamp(rhe(w / scale), −qmax, qmax), all-zero groups get scale 0 and q 0.
 */
function refQuantize(
  w: Float64Array,
  outFeatures: number,
  n: number,
  groupSize: number,
  qmax: number,
): { q: Int32Array; scales: Float64Array } {
  const groups = n / groupSize;
  const q = new Int32Array(outFeatures * n);
  const scales = new Float64Array(outFeatures * groups);
  for (let o = 0; o < outFeatures; o++) {
    for (let g = 0; g < groups; g++) {
      const base = o * n + g * groupSize;
      let absmax = 0;
      for (let k = 0; k < groupSize; k++) absmax = Math.max(absmax, Math.abs(w[base + k]!));
      const scale = Math.fround(absmax / qmax);
      scales[o * groups + g] = scale;
      for (let k = 0; k < groupSize; k++) {
        q[base + k] = scale === 0 ? 0 : Math.max(-qmax, Math.min(qmax, rhe(w[base + k]! / scale)));
      }
    }
  }
  return { q, scales };
}

/** Bytes with element 2j in the low nibble and 2j+1 in the high nibble, each stored as value + 8. */
function refPack(values: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(values.length / 2);
  for (let j = 0; j < out.length; j++) out[j] = values[2 * j]! + 8 + (values[2 * j + 1]! + 8) * 16;
  return out;
}

/** y[r, o] = Σ_k x[r, k] w[o, k] + b[o] in float64. */
function refLinear(
  x: Float64Array,
  w: ArrayLike<number>,
  n: number,
  outFeatures: number,
  bias?: Float64Array,
): Float64Array {
  const rows = x.length / n;
  const y = new Float64Array(rows * outFeatures);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outFeatures; o++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += x[r * n + k]! * w[o * n + k]!;
      y[r * outFeatures + o] = s + (bias === undefined ? 0 : bias[o]!);
    }
  }
  return y;
}

/** Dequantized weights q · scale[group] in float64 (exact). */
function refDequant(
  q: ArrayLike<number>,
  scales: ArrayLike<number>,
  outFeatures: number,
  n: number,
  groupSize: number,
) {
  const groups = n / groupSize;
  const w = new Float64Array(outFeatures * n);
  for (let o = 0; o < outFeatures; o++) {
    for (let k = 0; k < n; k++)
      w[o * n + k] = q[o * n + k]! * scales[o * groups + Math.floor(k / groupSize)]!;
  }
  return w;
}

/** Largest |w − deq| / (scale/2 + f32 rounding of deq) over all elements; ≤ 1 means within half a step. */
function worstHalfStepRatio(
  w: Float64Array,
  deq: ArrayLike<number>,
  scales: ArrayLike<number>,
  n: number,
  groupSize: number,
) {
  const groups = n / groupSize;
  let worst = 0;
  for (let i = 0; i < w.length; i++) {
    const o = Math.floor(i / n);
    const s = scales[o * groups + Math.floor((i % n) / groupSize)]!;
    const bound = s / 2 + 2 ** -24 * Math.abs(deq[i]!);
    const ratio = bound === 0 ? (w[i] === deq[i] ? 0 : Infinity) : Math.abs(w[i]! - deq[i]!) / bound;
    if (!(ratio <= worst)) worst = ratio;
  }
  return worst;
}

/**
 * Expected relative L2 error of a quantized linear if each weight's rounding error is uniform in ±scale/2 and
 * independent: sqrt(Σ_r Σ_o Σ_k x[r,k]² scale[o, g(k)]² / 12) / ‖y‖.
 */
function predictedRelL2(
  x: Float64Array,
  scales: ArrayLike<number>,
  y: Float64Array,
  n: number,
  groupSize: number,
) {
  const rows = x.length / n;
  const groups = n / groupSize;
  const outFeatures = scales.length / groups;
  let noise = 0;
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outFeatures; o++) {
      for (let k = 0; k < n; k++)
        noise += (x[r * n + k]! ** 2 * scales[o * groups + Math.floor(k / groupSize)]! ** 2) / 12;
    }
  }
  let signal = 0;
  for (const v of y) signal += v * v;
  return Math.sqrt(noise / signal);
}

const SHAPES_8: Shape[] = [
  [37, 4097],
  [111, 989],
  [7, 111],
  [1, 1],
  [989, 7],
];

// ---------------------------------------------------------------------------------------------------------

describe('roundHalfEven oracle (sanity of the test itself)', () => {
  it('rounds ties to even and everything else to nearest', () => {
    expect([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5].map(rhe)).toEqual([-2, -2, 0, 0, 2, 2, 4]);
    expect([-0.51, 0.49, 1.2, -126.7, 126.5].map(rhe)).toEqual([-1, 0, 1, -127, 126]);
  });
});

describe('quantizeInt8: per-channel scales and round-half-even', () => {
  SHAPES_8.forEach((shape, si) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`weight ${JSON.stringify(shape)} in ${dtype}`, () => {
        const [outFeatures, n] = shape as [number, number];
        const w = randn(shape, dtype, 100 + si * 10 + di, 0.05);
        const before = w.data.slice();
        const qw = quantizeInt8(w);
        const ws = f64(w);
        const ref = refQuantize(ws, outFeatures, n, n, 127);
        expect(qw.qweight.dtype).toBe('i8');
        expect(qw.qweight.shape).toEqual([outFeatures, n]);
        expect(qw.scales.dtype).toBe('f32');
        expect(qw.scales.shape).toEqual([outFeatures]);
        expect(Array.from(qw.scales.data)).toEqual(Array.from(ref.scales));
        expect(sameBits(qw.qweight.data, ref.q)).toBe(true);
        // Every row uses the full range: its largest |w| maps to ±127.
        for (let o = 0; o < outFeatures; o++) {
          let m = 0;
          for (let k = 0; k < n; k++) m = Math.max(m, Math.abs(qw.qweight.data[o * n + k]!));
          expect(m).toBe(127);
        }
        // Dequantization error within half a step per element.
        const deq = dequantizeInt8(qw);
        expect(deq.dtype).toBe('f32');
        expect(deq.shape).toEqual([outFeatures, n]);
        expect(worstHalfStepRatio(ws, deq.toArray(), qw.scales.data, n, n)).toBeLessThanOrEqual(1);
        expect(sameBits(w.data, before)).toBe(true);
      });
    });
  });

  it('rounds exact halves to even (scale exactly 1)', () => {
    // max|row| = 127 → scale 1, so q = rhe(w).
    const w = Tensor.fromArray([[127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -126.5, 100.5]], {
      dtype: 'bf16',
    });
    const qw = quantizeInt8(w);
    expect(qw.scales.toArray()).toEqual([1]);
    expect(Array.from(qw.qweight.data)).toEqual([127, 0, 2, 2, 0, -2, -2, 3, -126, 100]);
  });

  it('an all-zero row gets scale 0 and q 0; negative maxima count by magnitude', () => {
    const w = Tensor.fromArray([
      [0, 0, 0, 0],
      [-2.54, 1, 0.5, -0.02],
    ]);
    const qw = quantizeInt8(w);
    const s = Math.fround(Math.fround(-2.54) / -127);
    expect(qw.scales.toArray()).toEqual([0, s]);
    expect(Array.from(qw.qweight.data)).toEqual([
      0,
      0,
      0,
      0,
      -127,
      ...[1, 0.5, -0.02].map((v) => rhe(Math.fround(v) / s)),
    ]);
    expect(dequantizeInt8(qw).toArray().slice(0, 4)).toEqual([0, 0, 0, 0]);
  });
});

describe('dequantizeInt8', () => {
  it('multiplies q by the row scale (hand-computed), in the requested dtype', () => {
    const qw: Int8Weight = {
      qweight: Tensor.fromArray(
        [
          [1, -2, 127],
          [-127, 0, 3],
        ],
        { dtype: 'i8' },
      ),
      scales: Tensor.fromArray([0.5, 0.25]),
    };
    expect(dequantizeInt8(qw).toArray()).toEqual([0.5, -1, 63.5, -31.75, 0, 0.75]);
    const b = dequantizeInt8(qw, 'bf16');
    expect(b.dtype).toBe('bf16');
    expect(b.toArray()).toEqual([0.5, -1, 63.5, -31.75, 0, 0.75]);
  });

  FLOAT_DTYPES.forEach((dtype, di) => {
    it(`rounds q · scale once to ${dtype}`, () => {
      const w = randn([13, 50], 'f32', 200 + di);
      const qw = quantizeInt8(w);
      const q = Array.from(qw.qweight.data);
      const exact = refDequant(q, qw.scales.toArray(), 13, 50, 50);
      expect(Array.from(dequantizeInt8(qw, dtype).toArray())).toEqual(Array.from(roundAll(exact, dtype)));
    });
  });
});

describe('linearInt8', () => {
  const cases: [Shape, number][] = [
    [[3, 989], 111],
    [[2, 2, 111], 37],
    [[1, 4097], 7],
    [[5, 1], 3],
    [[2, 1024], 16],
  ];
  cases.forEach(([xShape, outFeatures], ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`x ${JSON.stringify(xShape)}, weight [${outFeatures}, ${xShape[xShape.length - 1]}] in ${dtype}`, () => {
        const n = xShape[xShape.length - 1]!;
        const x = randn(xShape, dtype, 300 + ci * 10 + di);
        const wFloat = randn([outFeatures, n], 'f32', 400 + ci * 10 + di, 1 / Math.sqrt(n));
        // Build the Int8Weight from the test's own quantization, not from quantizeInt8.
        const ref = refQuantize(f64(wFloat), outFeatures, n, n, 127);
        const qw: Int8Weight = {
          qweight: Tensor.fromArray(ref.q, { shape: [outFeatures, n], dtype: 'i8' }),
          scales: Tensor.fromArray(ref.scales, { shape: [outFeatures] }),
        };
        const bias = randn([outFeatures], dtype, 500 + ci * 10 + di);
        const before = x.data.slice();
        const y = linearInt8(x, qw, { bias });
        expect(y.shape).toEqual([...xShape.slice(0, -1), outFeatures]);
        const wDeq = refDequant(ref.q, ref.scales, outFeatures, n, n);
        expectMatches(y, refLinear(f64(x), wDeq, n, outFeatures, f64(bias)), dtype);
        expectMatches(linearInt8(x, qw), refLinear(f64(x), wDeq, n, outFeatures), dtype);
        expect(sameBits(x.data, before)).toBe(true);
      });
    });
  });

  it('stays within ~1e-2 relative L2 of the unquantized linear on Gaussian weights', () => {
    // Rounding noise is uniform in ±scale/2, so E‖y − y_q‖² = Σ_r Σ_o ‖x_r‖² scale_o² / 12. With scale ≈ 3.8σ/127
    // (max of 4096 Gaussians) that is ≈ 9e-3 relative (measured 9.0e-3 at 4096, 8.2e-3 at 1024). The model is
    // checked to ±30% (each estimate averages 256 outputs) and the error capped at 1.2e-2.
    for (const [n, seed] of [
      [4096, 600],
      [1024, 610],
    ] as const) {
      const x = randn([4, n], 'f32', seed);
      const w = randn([64, n], 'f32', seed + 1, 0.02);
      const qw = quantizeInt8(w);
      const exact = refLinear(f64(x), f64(w), n, 64);
      const { relL2 } = compare(linearInt8(x, qw).toArray(), exact);
      const predicted = predictedRelL2(f64(x), qw.scales.toArray(), exact, n, n);
      expect(relL2).toBeGreaterThan(0.7 * predicted);
      expect(relL2).toBeLessThan(1.3 * predicted);
      expect(relL2).toBeLessThan(1.2e-2);
    }
  });

  it('all-zero weight rows give zero outputs (or exactly the bias)', () => {
    const w = randn([3, 16], 'f32', 620);
    w.data.fill(0, 16, 32);
    const qw = quantizeInt8(w);
    expect(qw.scales.toArray()[1]).toBe(0);
    const x = randn([2, 16], 'f32', 621);
    const y = linearInt8(x, qw).toArray();
    expect([y[1], y[4]]).toEqual([0, 0]);
    const bias = Tensor.fromArray([1, -3.5, 2]);
    const yb = linearInt8(x, qw, { bias }).toArray();
    expect([yb[1], yb[4]]).toEqual([-3.5, -3.5]);
  });
});

describe('int4 packing', () => {
  it('packs every pair of values −8..7 as (lo + 8) | (hi + 8) << 4 and unpacks them back', () => {
    const values: number[] = [];
    for (let lo = -8; lo <= 7; lo++) for (let hi = -8; hi <= 7; hi++) values.push(lo, hi);
    const packed = packInt4(values);
    expect(packed).toBeInstanceOf(Uint8Array);
    expect(packed.length).toBe(256);
    for (let j = 0; j < 256; j++) {
      const lo = values[2 * j]!;
      const hi = values[2 * j + 1]!;
      expect(packed[j]).toBe((lo + 8) | ((hi + 8) << 4));
    }
    // Every byte value occurs exactly once.
    expect(new Set(packed).size).toBe(256);
    const unpacked = unpackInt4(packed);
    expect(unpacked).toBeInstanceOf(Int8Array);
    expect(Array.from(unpacked)).toEqual(values);
  });

  it('unpacks every byte: low nibble first, minus 8', () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const out = unpackInt4(bytes);
    for (let b = 0; b < 256; b++) {
      expect(out[2 * b]).toBe((b % 16) - 8);
      expect(out[2 * b + 1]).toBe(Math.floor(b / 16) - 8);
    }
  });

  it('hand-checked bytes', () => {
    expect(Array.from(packInt4([-8, 7, 0, 0, 1, -1]))).toEqual([0xf0, 0x88, 0x79]);
    expect(Array.from(packInt4([]))).toEqual([]);
  });

  it('rejects odd lengths and values outside −8..7', () => {
    expectQkError(() => packInt4([1, 2, 3]), QkValueError, 'QK_VALUE', 'packInt4', '"values"', 'even');
    expectQkError(() => packInt4([0, 8]), QkValueError, 'QK_VALUE', 'packInt4', '"values"', '8', 'index 1');
    expectQkError(() => packInt4([-9, 0]), QkValueError, 'QK_VALUE', 'packInt4', '"values"', '-9');
    expectQkError(() => packInt4([0.5, 0]), QkValueError, 'QK_VALUE', 'packInt4', '"values"');
    expectQkError(() => packInt4([Number.NaN, 0]), QkValueError, 'QK_VALUE', 'packInt4', '"values"');
  });
});

describe('quantizeInt4: group-wise scales and nibble layout', () => {
  const cases: [Shape, number | undefined][] = [
    [[7, 256], undefined], // default group 128
    [[5, 1024], undefined],
    [[3, 4096], 128],
    [[11, 192], 64],
    [[9, 96], 32],
    [[4, 14], 2],
    [[6, 222], 222], // one group spanning the row
  ];
  cases.forEach(([shape, groupSize], ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`weight ${JSON.stringify(shape)}, groupSize ${groupSize ?? 'default'} in ${dtype}`, () => {
        const [outFeatures, n] = shape as [number, number];
        const g = groupSize ?? 128;
        const w = randn(shape, dtype, 700 + ci * 10 + di, 0.05);
        const before = w.data.slice();
        const qw = quantizeInt4(w, groupSize === undefined ? {} : { groupSize });
        expect(qw.groupSize).toBe(g);
        expect(qw.qweight.dtype).toBe('u8');
        expect(qw.qweight.shape).toEqual([outFeatures, n / 2]);
        expect(qw.scales.dtype).toBe('f32');
        expect(qw.scales.shape).toEqual([outFeatures, n / g]);
        const ws = f64(w);
        const ref = refQuantize(ws, outFeatures, n, g, 7);
        expect(Array.from(qw.scales.data)).toEqual(Array.from(ref.scales));
        // Layout: byte j of a row holds element 2j (low nibble) and 2j+1 (high nibble), each as value + 8.
        expect(sameBits(qw.qweight.data, refPack(ref.q))).toBe(true);
        const deq = dequantizeInt4(qw);
        expect(deq.dtype).toBe('f32');
        expect(deq.shape).toEqual([outFeatures, n]);
        expect(worstHalfStepRatio(ws, deq.toArray(), qw.scales.data, n, g)).toBeLessThanOrEqual(1);
        expect(sameBits(w.data, before)).toBe(true);
      });
    });
  });

  it('DEFAULT_INT4_GROUP is 128', () => {
    expect(DEFAULT_INT4_GROUP).toBe(128);
  });

  it('rounds exact halves to even within each group (scale exactly 1)', () => {
    // Two groups of 4; each has max |w| = 7 → scale 1.
    const w = Tensor.fromArray([[7, 0.5, 1.5, 2.5, -3.5, -7, 6.5, -0.5]], { dtype: 'f16' });
    const qw = quantizeInt4(w, { groupSize: 4 });
    expect(qw.scales.toArray()).toEqual([1, 1]);
    const q = [7, 0, 2, 2, -4, -7, 6, 0];
    expect(Array.from(qw.qweight.data)).toEqual([15 + 8 * 16, 10 + 10 * 16, 4 + 1 * 16, 14 + 8 * 16]);
    expect(Array.from(unpackInt4(qw.qweight.data))).toEqual(q);
  });

  it('all-zero groups get scale 0 and dequantize to 0', () => {
    const w = randn([2, 64], 'f32', 800);
    w.data.fill(0, 32, 64); // second group of row 0
    w.data.fill(0, 64, 128); // all of row 1
    const qw = quantizeInt4(w, { groupSize: 32 });
    const s = qw.scales.toArray();
    expect(s[0]).toBeGreaterThan(0);
    expect(s.slice(1)).toEqual([0, 0, 0]);
    const deq = dequantizeInt4(qw).toArray();
    expect(deq.slice(32).every((v) => v === 0)).toBe(true);
    // Zero nibbles are stored as 8.
    expect(Array.from(qw.qweight.data.subarray(16)).every((b) => b === 0x88)).toBe(true);
  });
});

describe('dequantizeInt4', () => {
  it('decodes hand-packed bytes (including −8) group by group', () => {
    // Row of 4 values in 2 groups of 2: q = [−8, 7 | 3, −1], scales [0.5, 2].
    const qw: Int4Weight = {
      qweight: Tensor.fromStorage(Uint8Array.from([0 + 15 * 16, 11 + 7 * 16]), [1, 2], 'u8'),
      scales: Tensor.fromArray([[0.5, 2]]),
      groupSize: 2,
    };
    expect(dequantizeInt4(qw).toArray()).toEqual([-4, 3.5, 6, -2]);
    expect(dequantizeInt4(qw, 'f16').toArray()).toEqual([-4, 3.5, 6, -2]);
  });

  FLOAT_DTYPES.forEach((dtype, di) => {
    it(`rounds q · scale once to ${dtype}`, () => {
      const w = randn([6, 64], 'f32', 900 + di);
      const qw = quantizeInt4(w, { groupSize: 32 });
      const q = unpackInt4(qw.qweight.data);
      const exact = refDequant(q, qw.scales.toArray(), 6, 64, 32);
      expect(Array.from(dequantizeInt4(qw, dtype).toArray())).toEqual(Array.from(roundAll(exact, dtype)));
    });
  });
});

describe('linearInt4', () => {
  const cases: [Shape, number, number][] = [
    [[3, 256], 37, 128],
    [[2, 2, 192], 7, 64],
    [[1, 1024], 11, 32],
    [[4, 4096], 5, 128],
    [[2, 2], 1, 2],
  ];
  cases.forEach(([xShape, outFeatures, groupSize], ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`x ${JSON.stringify(xShape)}, weight [${outFeatures}, ${xShape[xShape.length - 1]}], group ${groupSize} in ${dtype}`, () => {
        const n = xShape[xShape.length - 1]!;
        const x = randn(xShape, dtype, 1000 + ci * 10 + di);
        const wFloat = randn([outFeatures, n], 'f32', 1100 + ci * 10 + di, 1 / Math.sqrt(n));
        // Build the Int4Weight from the test's own quantization and packing.
        const ref = refQuantize(f64(wFloat), outFeatures, n, groupSize, 7);
        const qw: Int4Weight = {
          qweight: Tensor.fromStorage(refPack(ref.q), [outFeatures, n / 2], 'u8'),
          scales: Tensor.fromArray(ref.scales, { shape: [outFeatures, n / groupSize] }),
          groupSize,
        };
        const bias = randn([outFeatures], dtype, 1200 + ci * 10 + di);
        const before = x.data.slice();
        const y = linearInt4(x, qw, { bias });
        expect(y.shape).toEqual([...xShape.slice(0, -1), outFeatures]);
        const wDeq = refDequant(ref.q, ref.scales, outFeatures, n, groupSize);
        expectMatches(y, refLinear(f64(x), wDeq, n, outFeatures, f64(bias)), dtype);
        expectMatches(linearInt4(x, qw), refLinear(f64(x), wDeq, n, outFeatures), dtype);
        expect(sameBits(x.data, before)).toBe(true);
      });
    });
  });

  it('stays within 0.15 relative L2 of the unquantized linear on Gaussian weights', () => {
    // Same noise model per group: scale ≈ 2.6σ/7 for groups of 128 Gaussians gives ≈ 0.11 relative, smaller
    // groups slightly less (measured 0.122, 0.106, 0.104 for groups 128, 64, 32). Model checked to ±30%.
    for (const [groupSize, seed] of [
      [128, 1300],
      [64, 1310],
      [32, 1320],
    ] as const) {
      const n = 2048;
      const x = randn([4, n], 'f32', seed);
      const w = randn([48, n], 'f32', seed + 1, 0.02);
      const qw = quantizeInt4(w, { groupSize });
      const exact = refLinear(f64(x), f64(w), n, 48);
      const { relL2 } = compare(linearInt4(x, qw).toArray(), exact);
      const predicted = predictedRelL2(f64(x), qw.scales.toArray(), exact, n, groupSize);
      expect(relL2).toBeGreaterThan(0.7 * predicted);
      expect(relL2).toBeLessThan(1.3 * predicted);
      expect(relL2).toBeLessThan(0.15);
    }
  });

  it('all-zero weight rows give zero outputs', () => {
    const w = randn([3, 64], 'f32', 1400);
    w.data.fill(0, 64, 128);
    const x = randn([2, 64], 'bf16', 1401);
    const y = linearInt4(x, quantizeInt4(w, { groupSize: 64 })).toArray();
    expect([y[1], y[4]]).toEqual([0, 0]);
  });
});

describe('quant: validation', () => {
  const w = randn([4, 64], 'f32', 1500);
  const x = randn([2, 64], 'f32', 1501);

  it('quantizeInt4 rejects in-features not divisible by groupSize', () => {
    expectQkError(
      () => quantizeInt4(randn([4, 96], 'f32', 1502), { groupSize: 64 }),
      QkShapeError,
      'QK_SHAPE',
      'quantizeInt4',
      '"weight"',
      'groupSize 64',
    );
    expectQkError(() => quantizeInt4(w), QkShapeError, 'QK_SHAPE', 'quantizeInt4', '"weight"', '128');
  });

  it('quantizeInt4 rejects odd, non-positive or non-integer group sizes', () => {
    expectQkError(
      () => quantizeInt4(randn([2, 63], 'f32', 1503), { groupSize: 3 }),
      QkValueError,
      'QK_VALUE',
      'quantizeInt4',
      '"groupSize"',
      'even',
    );
    for (const groupSize of [0, -32, 1.5, Number.NaN]) {
      expectQkError(
        () => quantizeInt4(w, { groupSize }),
        QkValueError,
        'QK_VALUE',
        'quantizeInt4',
        '"groupSize"',
      );
    }
  });

  it('both quantizers reject non-finite weights', () => {
    for (const bad of [Number.NaN, Infinity, -Infinity]) {
      const wb = randn([3, 32], 'f32', 1504);
      wb.data[40] = bad;
      expectQkError(() => quantizeInt8(wb), QkValueError, 'QK_VALUE', 'quantizeInt8', '"weight"', 'row 1');
      expectQkError(
        () => quantizeInt4(wb, { groupSize: 32 }),
        QkValueError,
        'QK_VALUE',
        'quantizeInt4',
        '"weight"',
        'row 1',
      );
    }
  });

  it('both quantizers reject non-matrix and integer weights', () => {
    expectQkError(
      () => quantizeInt8(randn([64], 'f32', 1505)),
      QkShapeError,
      'QK_SHAPE',
      'quantizeInt8',
      '"weight"',
    );
    expectQkError(
      () => quantizeInt4(randn([1, 2, 64], 'f32', 1506)),
      QkShapeError,
      'QK_SHAPE',
      'quantizeInt4',
      '"weight"',
    );
    const wi = Tensor.zeros([4, 64], 'i8');
    expectQkError(
      () => quantizeInt8(wi as never),
      QkDtypeError,
      'QK_DTYPE',
      'quantizeInt8',
      '"weight"',
      'i8',
    );
    expectQkError(
      () => quantizeInt4(wi as never),
      QkDtypeError,
      'QK_DTYPE',
      'quantizeInt4',
      '"weight"',
      'i8',
    );
  });

  it('int8: rejects a wrong scales shape or dtype and a wrong qweight dtype', () => {
    const qw = quantizeInt8(w);
    const badScales = { qweight: qw.qweight, scales: Tensor.zeros([5]) };
    expectQkError(
      () => linearInt8(x, badScales),
      QkShapeError,
      'QK_SHAPE',
      'linearInt8',
      '"weight.scales"',
      '[4]',
    );
    expectQkError(
      () => dequantizeInt8(badScales),
      QkShapeError,
      'QK_SHAPE',
      'dequantizeInt8',
      '"weight.scales"',
    );
    const scales16 = { qweight: qw.qweight, scales: Tensor.zeros([4], 'f16') as never };
    expectQkError(
      () => linearInt8(x, scales16),
      QkDtypeError,
      'QK_DTYPE',
      'linearInt8',
      '"weight.scales"',
      'f16',
    );
    const u8 = { qweight: Tensor.zeros([4, 64], 'u8') as never, scales: qw.scales };
    expectQkError(() => linearInt8(x, u8), QkDtypeError, 'QK_DTYPE', 'linearInt8', '"weight.qweight"', 'u8');
    const f32q = { qweight: Tensor.zeros([4, 64]) as never, scales: qw.scales };
    expectQkError(
      () => dequantizeInt8(f32q),
      QkDtypeError,
      'QK_DTYPE',
      'dequantizeInt8',
      '"weight.qweight"',
      'f32',
    );
    expectQkError(() => linearInt8(x, null as never), QkValueError, 'QK_VALUE', 'linearInt8', '"weight"');
  });

  it('int4: rejects a wrong scales shape, qweight dtype or group size', () => {
    const qw = quantizeInt4(w, { groupSize: 32 });
    const badScales = { ...qw, scales: Tensor.zeros([4, 3]) };
    expectQkError(
      () => linearInt4(x, badScales),
      QkShapeError,
      'QK_SHAPE',
      'linearInt4',
      '"weight.scales"',
      '[4, 2]',
    );
    expectQkError(
      () => dequantizeInt4(badScales),
      QkShapeError,
      'QK_SHAPE',
      'dequantizeInt4',
      '"weight.scales"',
    );
    const i8 = { ...qw, qweight: Tensor.zeros([4, 32], 'i8') as never };
    expectQkError(() => linearInt4(x, i8), QkDtypeError, 'QK_DTYPE', 'linearInt4', '"weight.qweight"', 'i8');
    const badGroup = { ...qw, groupSize: 48 };
    expectQkError(
      () => linearInt4(x, badGroup),
      QkValueError,
      'QK_VALUE',
      'linearInt4',
      '"weight.groupSize"',
    );
    const oddGroup = { ...qw, groupSize: 1 };
    expectQkError(
      () => dequantizeInt4(oddGroup),
      QkValueError,
      'QK_VALUE',
      'dequantizeInt4',
      '"weight.groupSize"',
    );
    expectQkError(() => linearInt4(x, null as never), QkValueError, 'QK_VALUE', 'linearInt4', '"weight"');
  });

  it('linearInt8 / linearInt4 reject an in-features mismatch and a bias of the wrong shape or dtype', () => {
    const x48 = randn([2, 48], 'f32', 1507);
    const q8 = quantizeInt8(w);
    const q4 = quantizeInt4(w, { groupSize: 32 });
    expectQkError(() => linearInt8(x48, q8), QkShapeError, 'QK_SHAPE', 'linearInt8', '"x"', '64');
    expectQkError(() => linearInt4(x48, q4), QkShapeError, 'QK_SHAPE', 'linearInt4', '"x"', '64');
    expectQkError(
      () => linearInt8(x, q8, { bias: Tensor.zeros([3]) }),
      QkShapeError,
      'QK_SHAPE',
      'linearInt8',
      '"bias"',
    );
    expectQkError(
      () => linearInt4(x, q4, { bias: Tensor.zeros([5]) }),
      QkShapeError,
      'QK_SHAPE',
      'linearInt4',
      '"bias"',
    );
    const b16 = randn([4], 'bf16', 1508);
    expectQkError(
      () => linearInt8(x, q8, { bias: b16 as never }),
      QkDtypeError,
      'QK_DTYPE',
      'linearInt8',
      '"bias"',
      'bf16',
    );
    expectQkError(
      () => linearInt4(x, q4, { bias: b16 as never }),
      QkDtypeError,
      'QK_DTYPE',
      'linearInt4',
      '"bias"',
      'bf16',
    );
    const xi = Tensor.zeros([2, 64], 'i32');
    expectQkError(() => linearInt8(xi as never, q8), QkDtypeError, 'QK_DTYPE', 'linearInt8', '"x"', 'i32');
  });

  it('rejects disposed tensors', () => {
    const qw = quantizeInt8(w);
    qw.scales.dispose();
    expectQkError(() => linearInt8(x, qw), QkDisposedError, 'QK_DISPOSED', 'linearInt8', '"weight.scales"');
    const gone = randn([4, 64], 'f32', 1509);
    gone.dispose();
    expectQkError(
      () => quantizeInt4(gone, { groupSize: 32 }),
      QkDisposedError,
      'QK_DISPOSED',
      'quantizeInt4',
      '"weight"',
    );
  });
});
