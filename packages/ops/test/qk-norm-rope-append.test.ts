/**
 * qkNormRopeAppend against a float64 oracle written here: the q|k|v row of each token is split into heads; query and
 * key heads are normalised (v = x·w / sqrt(Σx²/d + eps)) and rotated (rotate-half) by HF's float32 angle
 * fround(p · invFreq[i]), rounded once; keys go to cache row p, values are copied there bit for bit. The caches start
 * poisoned with NaN, and every row no position names must keep its bits.
 */
import { describe, expect, it } from 'vitest';
import {
  cudaAvailable,
  cudaStatus,
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkIndexError,
  QkShapeError,
  QkValueError,
  qkNormRope,
  qkNormRopeAppend,
  Rng,
  roundToDType,
  scatterRows,
  Tensor,
} from '../src/index.js';
import { assertClose } from '../src/testing/index.js';
import { expectNear, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn, sameBits } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Oracle
// ---------------------------------------------------------------------------------------------------------

interface Layout {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
}

/** float64 RMSNorm of one head `x` (weights `w`) then rotate-half RoPE at position `p`. */
function normRope(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  p: number,
  theta: number,
  eps: number,
): number[] {
  const d = x.length;
  const half = d / 2;
  const f = Math.fround;
  let sumSq = 0;
  for (let i = 0; i < d; i++) sumSq += x[i]! ** 2;
  const rms = Math.sqrt(sumSq / d + eps);
  const v = Array.from(x, (xi, i) => (xi * w[i]!) / rms);
  const y = new Array<number>(d);
  for (let i = 0; i < half; i++) {
    const angle = f(p * f(1 / f(theta ** f((2 * i) / d))));
    const [c, s] = [Math.cos(angle), Math.sin(angle)];
    y[i] = v[i]! * c - v[half + i]! * s;
    y[half + i] = v[half + i]! * c + v[i]! * s;
  }
  return y;
}

/** The oracle's queries `[tokens, qHeads, d]` and per-token key and value rows `[tokens, kvHeads, d]`. */
function oracle(
  qkv: Float64Array,
  l: Layout,
  qw: Float64Array,
  kw: Float64Array,
  positions: ArrayLike<number>,
  dtype: FloatDType,
  theta = 1e6,
  eps = 1e-6,
): { q: number[]; k: number[]; v: number[] } {
  const d = l.headDim;
  const heads = l.qHeads + 2 * l.kvHeads;
  const head = (t: number, h: number) => qkv.subarray((t * heads + h) * d, (t * heads + h + 1) * d);
  const q: number[] = [];
  const k: number[] = [];
  const v: number[] = [];
  for (let t = 0; t < l.tokens; t++) {
    const p = positions[t]!;
    for (let h = 0; h < l.qHeads; h++) q.push(...normRope(head(t, h), qw, p, theta, eps));
    for (let h = 0; h < l.kvHeads; h++) {
      k.push(...normRope(head(t, l.qHeads + h), kw, p, theta, eps));
      v.push(...head(t, l.qHeads + l.kvHeads + h));
    }
  }
  const round = (a: number[]) => a.map((x) => roundToDType(x, dtype));
  return { q: round(q), k: round(k), v };
}

/** Rows `positions` of `cache` stacked as a new `[positions.length, ...row]` tensor. */
function rowsAt<D extends FloatDType>(cache: Tensor<D>, positions: ArrayLike<number>): Tensor<D> {
  const values = Array.from(positions, (p) => cache.slice(p, p + 1).toArray()).flat();
  return Tensor.fromArray(values, { shape: [positions.length, ...cache.shape.slice(1)], dtype: cache.dtype });
}

/** Rows of `after` whose bytes differ from `before` (same shapes, CPU). */
function changedRows(before: Tensor, after: Tensor): number[] {
  const rowBytes = before.nbytes / before.shape[0]!;
  const a = new Uint8Array(before.data.buffer, before.data.byteOffset, before.nbytes);
  const b = new Uint8Array(after.data.buffer, after.data.byteOffset, after.nbytes);
  const rows: number[] = [];
  for (let r = 0; r < before.shape[0]!; r++) {
    for (let i = r * rowBytes; i < (r + 1) * rowBytes; i++) {
      if (a[i] !== b[i]) {
        rows.push(r);
        break;
      }
    }
  }
  return rows;
}

/** `count` distinct rows of `rows`, seeded. */
function distinctPositions(rows: number, count: number, seed: number): number[] {
  const rng = new Rng(seed);
  const all = Array.from({ length: rows }, (_, i) => i);
  for (let i = 0; i < count; i++) {
    const j = i + rng.nextInt(rows - i);
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  return all.slice(0, count);
}

/** Inputs of one call: qkv (flat or split), norm weights, NaN-poisoned caches and distinct positions. */
function setup<D extends FloatDType>(l: Layout, rows: number, dtype: D, seed: number, flat: boolean) {
  const heads = l.qHeads + 2 * l.kvHeads;
  const shape = flat ? [l.tokens, heads * l.headDim] : [l.tokens, heads, l.headDim];
  const qkv = randn(shape, dtype, seed, 2);
  const qw = randn([l.headDim], dtype, seed + 1);
  const kw = randn([l.headDim], dtype, seed + 2);
  const kCache = Tensor.full([rows, l.kvHeads, l.headDim], Number.NaN, dtype);
  const vCache = Tensor.full([rows, l.kvHeads, l.headDim], Number.NaN, dtype);
  const positions = distinctPositions(rows, l.tokens, seed + 3);
  return { qkv, qw, kw, kCache, vCache, positions };
}

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

// ---------------------------------------------------------------------------------------------------------

const LAYOUTS: (Layout & { rows: number; label: string })[] = [
  { tokens: 4, qHeads: 16, kvHeads: 8, headDim: 128, rows: 64, label: 'Qwen3-0.6B heads' },
  { tokens: 2, qHeads: 32, kvHeads: 8, headDim: 128, rows: 40, label: 'Qwen3-8B heads' },
  { tokens: 5, qHeads: 7, kvHeads: 1, headDim: 64, rows: 5, label: 'one KV head, every row written' },
  ...ODD_SIZES.map((n) => ({
    tokens: 3,
    qHeads: 3,
    kvHeads: 2,
    headDim: 2 * n,
    rows: 11,
    label: `${n} (odd) rotation pairs`,
  })),
];
const CASES = FLOAT_DTYPES.flatMap((dtype, di) =>
  LAYOUTS.map((l, li) => ({ dtype, ...l, flat: li % 2 === 0, seed: 60_000 + 100 * di + li })),
);

describe('qkNormRopeAppend', () => {
  it.each(CASES)('$dtype $label (q$qHeads kv$kvHeads d$headDim, flat=$flat) matches the oracle', (c) => {
    const { dtype, rows, seed, flat } = c;
    const { qkv, qw, kw, kCache, vCache, positions } = setup(c, rows, dtype, seed, flat);
    const [kBefore, vBefore] = [kCache.clone(), vCache.clone()];
    const qkvBefore = qkv.toArray();
    const q = qkNormRopeAppend(qkv, qw, kw, {
      qHeads: c.qHeads,
      kvHeads: c.kvHeads,
      positions,
      kCache,
      vCache,
    });
    expect(q.shape).toEqual([c.tokens, c.qHeads, c.headDim]);
    expect(q.dtype).toBe(dtype);
    const want = oracle(f64(qkv), c, f64(qw), f64(kw), positions, dtype);
    expectNear(q, want.q, dtype);
    expectNear(rowsAt(kCache, positions), want.k, dtype);
    expect(sameBits(rowsAt(vCache, positions).toArray(), want.v)).toBe(true);
    const written = [...positions].sort((a, b) => a - b);
    expect(changedRows(kBefore, kCache)).toEqual(written);
    expect(changedRows(vBefore, vCache)).toEqual(written);
    expect(qkv.toArray()).toEqual(qkvBefore);
  });

  it.each(FLOAT_DTYPES)('%s: theta and eps are honoured, positions in any form agree', (dtype) => {
    const l = { tokens: 3, qHeads: 2, kvHeads: 1, headDim: 16 };
    const { qkv, qw, kw, positions } = setup(l, 9, dtype, 61_000 + FLOAT_DTYPES.indexOf(dtype), false);
    const want = oracle(f64(qkv), l, f64(qw), f64(kw), positions, dtype, 1e4, 1e-2);
    const forms = [positions, Int32Array.from(positions), Tensor.fromArray(positions, { dtype: 'i32' })];
    for (const p of forms) {
      const kCache = Tensor.full([9, 1, 16], Number.NaN, dtype);
      const vCache = Tensor.full([9, 1, 16], Number.NaN, dtype);
      const q = qkNormRopeAppend(qkv, qw, kw, {
        ...l,
        positions: p,
        theta: 1e4,
        eps: 1e-2,
        kCache,
        vCache,
      });
      expectNear(q, want.q, dtype);
      expectNear(rowsAt(kCache, positions), want.k, dtype);
    }
  });

  it.each(FLOAT_DTYPES)('%s: is qkNormRope of the q and k heads plus scatterRows, bit for bit', (dtype) => {
    const l = { tokens: 4, qHeads: 4, kvHeads: 2, headDim: 32 };
    const { qkv, qw, kw, kCache, vCache, positions } = setup(l, 13, dtype, 61_100, false);
    const q = qkNormRopeAppend(qkv, qw, kw, { ...l, positions, kCache, vCache });
    // The three head groups, cut out of qkv by hand.
    const all = qkv.toArray();
    const group = (first: number, count: number) =>
      Tensor.fromArray(
        Array.from({ length: l.tokens }, (_, t) =>
          all.slice((t * 8 + first) * 32, (t * 8 + first + count) * 32),
        ).flat(),
        { shape: [l.tokens, count, 32], dtype },
      );
    expect(sameBits(q.toArray(), qkNormRope(group(0, 4), qw, { positions }).toArray())).toBe(true);
    const kWant = Tensor.full([13, 2, 32], Number.NaN, dtype);
    scatterRows(kWant, qkNormRope(group(4, 2), kw, { positions }), positions);
    const vWant = Tensor.full([13, 2, 32], Number.NaN, dtype);
    scatterRows(vWant, group(6, 2), positions);
    expect(sameBits(kCache.toArray(), kWant.toArray())).toBe(true);
    expect(sameBits(vCache.toArray(), vWant.toArray())).toBe(true);
  });

  it('writes the queries into out and returns it', () => {
    const l = { tokens: 2, qHeads: 3, kvHeads: 1, headDim: 8 };
    const { qkv, qw, kw, kCache, vCache, positions } = setup(l, 4, 'bf16', 61_200, true);
    const out = Tensor.full([2, 3, 8], Number.NaN, 'bf16');
    expect(qkNormRopeAppend(qkv, qw, kw, { ...l, positions, kCache, vCache, out })).toBe(out);
    expectNear(out, oracle(f64(qkv), l, f64(qw), f64(kw), positions, 'bf16').q, 'bf16');
  });

  it('keeps a NaN inside its own head', () => {
    const l = { tokens: 1, qHeads: 1, kvHeads: 1, headDim: 4 };
    const values = randn([1, 12], 'f32', 61_300).toArray();
    values[1] = Number.NaN; // query head
    values[9] = Number.NaN; // value head
    const qkv = Tensor.fromArray(values, { shape: [1, 12] });
    const kCache = Tensor.zeros([2, 1, 4]);
    const vCache = Tensor.zeros([2, 1, 4]);
    const q = qkNormRopeAppend(qkv, Tensor.ones([4]), Tensor.ones([4]), {
      ...l,
      positions: [1],
      kCache,
      vCache,
    });
    for (const v of q.toArray()) expect(v).toBeNaN();
    expect(kCache.toArray().slice(4).every(Number.isFinite)).toBe(true);
    expect(Number.isNaN(vCache.toArray()[5])).toBe(true);
    expect(kCache.toArray().slice(0, 4)).toEqual([0, 0, 0, 0]);
  });
});

describe('qkNormRopeAppend argument errors', () => {
  const l = { tokens: 2, qHeads: 2, kvHeads: 1, headDim: 8 };
  const make = () => setup(l, 5, 'f32', 62_000, false);
  const { qkv, qw, kw } = make();
  const caches = () => ({ kCache: Tensor.zeros([5, 1, 8]), vCache: Tensor.zeros([5, 1, 8]) });
  const base = () => ({ ...l, positions: [0, 4], ...caches() });

  it('checks the shape of qkv against the heads and headDim', () => {
    for (const bad of [[2, 31], [2, 4, 9], [2, 3, 8], [32], [2, 1, 4, 8]]) {
      expectQkError(
        () => qkNormRopeAppend(randn(bad, 'f32', 62_001), qw, kw, base()),
        QkShapeError,
        'QK_SHAPE',
        'qkNormRopeAppend:',
        '"qkv"',
        '[tokens, 32] or [tokens, 4, 8]',
      );
    }
  });

  it('checks the norm weights: an even headDim, one length, the dtype of qkv', () => {
    expectQkError(
      () =>
        qkNormRopeAppend(randn([2, 28], 'f32', 62_002), randn([7], 'f32', 1), randn([7], 'f32', 2), base()),
      QkShapeError,
      'QK_SHAPE',
      '"qNormWeight"',
      'even',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, randn([6], 'f32', 3), base()),
      QkShapeError,
      'QK_SHAPE',
      '"kNormWeight"',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, randn([1, 8], 'f32', 4), kw, base()),
      QkShapeError,
      'QK_SHAPE',
      '"qNormWeight"',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, randn([8], 'bf16', 5) as unknown as Tensor<'f32'>, kw, base()),
      QkDtypeError,
      'QK_DTYPE',
      '"qNormWeight"',
      'bf16',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, randn([8], 'f16', 6) as unknown as Tensor<'f32'>, base()),
      QkDtypeError,
      'QK_DTYPE',
      '"kNormWeight"',
    );
    const ints = Tensor.fromArray(new Array(64).fill(1), { shape: [2, 4, 8], dtype: 'i32' });
    expectQkError(
      () => qkNormRopeAppend(ints as unknown as Tensor<'f32'>, qw, kw, base()),
      QkDtypeError,
      'QK_DTYPE',
      '"qkv"',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, disposed(randn([8], 'f32', 7)), kw, base()),
      QkDisposedError,
      'QK_DISPOSED',
      'qkNormRopeAppend (argument "qNormWeight")',
    );
  });

  it('checks the head counts', () => {
    for (const [arg, bad] of [
      ['qHeads', 0],
      ['qHeads', 1.5],
      ['kvHeads', -1],
      ['kvHeads', undefined],
    ] as const) {
      expectQkError(
        () => qkNormRopeAppend(qkv, qw, kw, { ...base(), [arg]: bad }),
        QkValueError,
        'QK_VALUE',
        `"${arg}"`,
      );
    }
  });

  it('checks the caches', () => {
    const bad = (
      kCache: Tensor,
      vCache: Tensor,
      arg: string,
      ctor: typeof QkShapeError | typeof QkDtypeError,
    ) =>
      expectQkError(
        () =>
          qkNormRopeAppend(qkv, qw, kw, {
            ...l,
            positions: [0, 1],
            kCache: kCache as Tensor<'f32'>,
            vCache: vCache as Tensor<'f32'>,
          }),
        ctor,
        ctor === QkShapeError ? 'QK_SHAPE' : 'QK_DTYPE',
        `"${arg}"`,
      );
    const ok = Tensor.zeros([5, 1, 8]);
    bad(Tensor.zeros([5, 2, 8]), ok, 'kCache', QkShapeError);
    bad(Tensor.zeros([5, 1, 6]), ok, 'kCache', QkShapeError);
    bad(Tensor.zeros([5, 8]), ok, 'kCache', QkShapeError);
    bad(ok, Tensor.zeros([6, 1, 8]), 'vCache', QkShapeError);
    bad(Tensor.zeros([5, 1, 8], 'bf16'), ok, 'kCache', QkDtypeError);
    bad(ok, Tensor.zeros([5, 1, 8], 'f16'), 'vCache', QkDtypeError);
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...l, positions: [0, 1] } as never),
      QkValueError,
      'QK_VALUE',
      '"kCache"',
      'must be a Tensor',
    );
  });

  it('checks positions, and writes nothing when a position lies outside the caches', () => {
    const { kCache, vCache } = caches();
    const out = Tensor.zeros([2, 2, 8]);
    const before = [kCache.toArray(), vCache.toArray(), out.toArray()];
    const err = expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...l, positions: [1, 5], kCache, vCache, out }),
      QkIndexError,
      'QK_INDEX',
      'qkNormRopeAppend:',
      '"positions"',
      'outside [0, 5)',
      'token 1',
    );
    expect((err as QkIndexError).index).toBe(5);
    expect([kCache.toArray(), vCache.toArray(), out.toArray()]).toEqual(before);
    for (const positions of [[0], [0, 1, 2]]) {
      expectQkError(
        () => qkNormRopeAppend(qkv, qw, kw, { ...base(), positions }),
        QkShapeError,
        'QK_SHAPE',
        '"positions"',
      );
    }
    for (const p of [-1, 1.5, Number.NaN]) {
      expectQkError(
        () => qkNormRopeAppend(qkv, qw, kw, { ...base(), positions: [0, p] }),
        QkValueError,
        'QK_VALUE',
        '"positions"',
      );
    }
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...base(), positions: Tensor.fromArray([0, 1]) as never }),
      QkDtypeError,
      'QK_DTYPE',
      '"positions"',
    );
  });

  it('checks theta, eps and out', () => {
    for (const theta of [0, -1, Number.NaN]) {
      expectQkError(
        () => qkNormRopeAppend(qkv, qw, kw, { ...base(), theta }),
        QkValueError,
        'QK_VALUE',
        '"theta"',
      );
    }
    for (const eps of [0, Number.POSITIVE_INFINITY]) {
      expectQkError(
        () => qkNormRopeAppend(qkv, qw, kw, { ...base(), eps }),
        QkValueError,
        'QK_VALUE',
        '"eps"',
      );
    }
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...base(), out: Tensor.zeros([2, 4, 8]) }),
      QkShapeError,
      'QK_SHAPE',
      '"out"',
    );
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...base(), out: Tensor.zeros([2, 2, 8], 'bf16') }),
      QkDtypeError,
      'QK_DTYPE',
      '"out"',
    );
  });

  it('refuses outputs that share memory with qkv or with each other', () => {
    const shared = Tensor.zeros([5, 1, 8]);
    expectQkError(
      () => qkNormRopeAppend(qkv, qw, kw, { ...l, positions: [0, 1], kCache: shared, vCache: shared }),
      QkValueError,
      'QK_VALUE',
      '"kCache"',
      'shares memory with "vCache"',
    );
    // out viewing the query heads of qkv itself.
    const split = qkv.reshape([2, 4, 8]);
    const view = split.slice(0, 1).reshape([2, 2, 8]);
    expectQkError(
      () => qkNormRopeAppend(split, qw, kw, { ...base(), out: view }),
      QkValueError,
      'QK_VALUE',
      '"out"',
      'shares memory with "qkv"',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// CUDA against the CPU reference (the kernel's full sweep is in the verify cases, cuda-verify.test.ts).
// ---------------------------------------------------------------------------------------------------------

const gpu = cudaAvailable();

describe(`qkNormRopeAppend on CUDA (${gpu ? 'GPU present' : `skipped: ${cudaStatus().reason}`})`, () => {
  // headDim 128 and 256 run the fused kernel, 258 the separate ops.
  const GPU_CASES = FLOAT_DTYPES.flatMap((dtype) =>
    [128, 256, 258].flatMap((headDim) =>
      [true, false].map((devicePositions) => ({ dtype, headDim, devicePositions })),
    ),
  );

  it.skipIf(!gpu).each(GPU_CASES)(
    '$dtype headDim $headDim, device positions: $devicePositions',
    ({ dtype, headDim, devicePositions }) => {
      const l = { tokens: 5, qHeads: 4, kvHeads: 2, headDim };
      const { qkv, qw, kw, kCache, vCache, positions } = setup(
        l,
        17,
        dtype,
        63_000 + headDim,
        !devicePositions,
      );
      const [kRef, vRef] = [kCache.clone(), vCache.clone()];
      const q = qkNormRopeAppend(qkv, qw, kw, { ...l, positions, kCache: kRef, vCache: vRef });
      const [gqkv, gqw, gkw, gk, gv] = [qkv, qw, kw, kCache, vCache].map((t) => t.to('cuda')) as Tensor<
        typeof dtype
      >[];
      const at = devicePositions ? Tensor.fromArray(positions, { dtype: 'i32' }).to('cuda') : positions;
      const out = Tensor.full([5, 4, headDim], Number.NaN, dtype).to('cuda');
      qkNormRopeAppend(gqkv!, gqw!, gkw!, { ...l, positions: at, kCache: gk!, vCache: gv!, out });
      assertClose(out.to('cpu'), q, { op: 'qkNormRopeAppend', dtype });
      const [kGot, vGot] = [gk!.to('cpu'), gv!.to('cpu')];
      assertClose(rowsAt(kGot, positions), rowsAt(kRef, positions), { op: 'qkNormRopeAppend', dtype });
      expect(sameBits(vGot.toArray(), vRef.toArray())).toBe(true);
      const untouched = Array.from({ length: 17 }, (_, r) => r).filter((r) => !positions.includes(r));
      expect(changedRows(rowsAt(kCache, untouched), rowsAt(kGot, untouched))).toEqual([]);
    },
  );

  it.skipIf(!gpu)('a device position outside the caches writes no row but still produces its queries', () => {
    const l = { tokens: 2, qHeads: 2, kvHeads: 1, headDim: 128 };
    const { qkv, qw, kw, kCache, vCache } = setup(l, 4, 'bf16', 63_500, false);
    const [gk, gv] = [kCache.to('cuda'), vCache.to('cuda')];
    const at = Tensor.fromArray([2, 4], { dtype: 'i32' }).to('cuda');
    const q = qkNormRopeAppend(qkv.to('cuda'), qw.to('cuda'), kw.to('cuda'), {
      ...l,
      positions: at,
      kCache: gk,
      vCache: gv,
    });
    const heads = qkv.reshape([2, 4, 128]).toArray();
    const qIn = Tensor.fromArray([...heads.slice(0, 256), ...heads.slice(512, 768)], {
      shape: [2, 2, 128],
      dtype: 'bf16',
    });
    assertClose(q.to('cpu'), qkNormRope(qIn, qw, { positions: [2, 4] }), {
      op: 'qkNormRopeAppend',
      dtype: 'bf16',
    });
    expect(changedRows(kCache, gk.to('cpu'))).toEqual([2]);
    expect(changedRows(vCache, gv.to('cpu'))).toEqual([2]);
  });
});
