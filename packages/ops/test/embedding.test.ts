import { describe, expect, it } from 'vitest';
import {
  embedding,
  QkDisposedError,
  QkDtypeError,
  QkIndexError,
  QkShapeError,
  QkValueError,
  Rng,
  Tensor,
} from '../src/index.js';
import { expectQkError, FLOAT_DTYPES, randn } from './helpers.js';

/** Seeded token ids in [0, vocab). */
function randomIds(count: number, vocab: number, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => rng.nextInt(vocab));
}

/** Asserts row i of `out` holds exactly the raw storage of row ids[i] of `table` (bit patterns, not values). */
function expectRowsCopied(out: Tensor, table: Tensor, ids: ArrayLike<number>, hidden: number): void {
  const dst = out.data;
  const src = table.data;
  expect(dst.length).toBe(ids.length * hidden);
  let mismatches = 0;
  for (let i = 0; i < ids.length; i++) {
    const row = ids[i]!;
    for (let c = 0; c < hidden; c++) {
      if (!Object.is(dst[i * hidden + c], src[row * hidden + c])) mismatches++;
    }
  }
  expect(mismatches).toBe(0);
}

describe('embedding: bit-exact lookup', () => {
  FLOAT_DTYPES.forEach((dtype, di) => {
    it(`gathers rows of a [151, 1024] ${dtype} table for i32 ids of shape [2, 5]`, () => {
      const vocab = 151;
      const hidden = 1024; // Qwen3-0.6B hidden size
      const table = randn([vocab, hidden], dtype, 100 + di);
      const idValues = randomIds(10, vocab, 200 + di);
      idValues[3] = 0;
      idValues[7] = vocab - 1;
      idValues[8] = idValues[2]!; // a repeated id
      const ids = Tensor.fromArray(idValues, { shape: [2, 5], dtype: 'i32' });
      const tableBefore = table.data.slice();
      const out = embedding(ids, table);
      expect(out.shape).toEqual([2, 5, hidden]);
      expect(out.dtype).toBe(dtype);
      expectRowsCopied(out, table, idValues, hidden);
      expect(Array.from(table.data)).toEqual(Array.from(tableBefore));
      expect(Array.from(ids.data)).toEqual(idValues);
    });

    it(`accepts a plain array of ids (${dtype}), odd hidden 111`, () => {
      const table = randn([7, 111], dtype, 300 + di);
      const idValues = [6, 0, 3, 3, 1];
      const out = embedding(idValues, table);
      expect(out.shape).toEqual([5, 111]);
      expectRowsCopied(out, table, idValues, 111);
      const fromTyped = embedding(Int32Array.from([2]), table);
      expect(fromTyped.shape).toEqual([1, 111]);
      expectRowsCopied(fromTyped, table, [2], 111);
    });
  });

  it('copies NaN payloads, infinities, signed zeros and subnormals bit for bit', () => {
    const f32 = Tensor.fromArray([0, 0, 0, 0, 1, 2, 3, 4], { shape: [2, 4] });
    const bits = new Uint32Array(f32.data.buffer, f32.data.byteOffset, f32.data.length);
    bits[0] = 0x7fc01234; // NaN with a payload
    bits[1] = 0x80000000; // −0
    bits[2] = 0x00000001; // smallest subnormal
    bits[3] = 0xff800000; // −∞
    const out32 = embedding([0, 1, 0], f32);
    const outBits = new Uint32Array(out32.data.buffer, out32.data.byteOffset, out32.data.length);
    expect(Array.from(outBits.subarray(0, 4))).toEqual([0x7fc01234, 0x80000000, 0x00000001, 0xff800000]);
    expect(Array.from(outBits.subarray(8, 12))).toEqual([0x7fc01234, 0x80000000, 0x00000001, 0xff800000]);
    for (const dtype of ['f16', 'bf16'] as const) {
      const patterns = dtype === 'f16' ? [0x7e01, 0x8000, 0x0001, 0xfc00] : [0x7fc1, 0x8000, 0x0001, 0xff80];
      const t = Tensor.fromStorage(
        Uint16Array.from([...patterns, 0x3c00, 0x4000, 0x4200, 0x4400]),
        [2, 4],
        dtype,
      );
      const out = embedding([1, 0], t);
      expect(Array.from(out.data)).toEqual([0x3c00, 0x4000, 0x4200, 0x4400, ...patterns]);
    }
  });

  it('returns a copy: writing to the output leaves the table alone', () => {
    const table = randn([3, 4], 'f32', 400);
    const before = Array.from(table.data);
    const out = embedding([1], table);
    out.data.fill(42);
    expect(Array.from(table.data)).toEqual(before);
  });

  it('empty ids give an empty [0, hidden] result; a scalar i32 id gives [hidden]', () => {
    const table = randn([5, 6], 'bf16', 500);
    const empty = embedding([], table);
    expect(empty.shape).toEqual([0, 6]);
    expect(empty.dtype).toBe('bf16');
    const scalarId = Tensor.fromArray(4, { dtype: 'i32' });
    const one = embedding(scalarId, table);
    expect(one.shape).toEqual([6]);
    expectRowsCopied(one, table, [4], 6);
  });

  it('reads ids through a sliced i32 view', () => {
    const table = randn([9, 5], 'f16', 600);
    const all = Tensor.fromArray(
      [
        [1, 2],
        [8, 0],
        [4, 4],
      ],
      { dtype: 'i32' },
    );
    const view = all.slice(1, 3);
    const out = embedding(view, table);
    expect(out.shape).toEqual([2, 2, 5]);
    expectRowsCopied(out, table, [8, 0, 4, 4], 5);
  });
});

describe('embedding: validation', () => {
  const table = randn([10, 4], 'f32', 700);

  it('rejects out-of-range token ids with QkIndexError', () => {
    const err = expectQkError(
      () => embedding([1, 10], table),
      QkIndexError,
      'QK_INDEX',
      'embedding',
      '"ids"',
      '10',
      '[0, 10)',
    );
    expect((err as QkIndexError).index).toBe(10);
    expect((err as QkIndexError).limit).toBe(10);
    expectQkError(() => embedding([-1], table), QkIndexError, 'QK_INDEX', 'embedding', '"ids"', '-1');
    expectQkError(() => embedding([0, 2.5], table), QkIndexError, 'QK_INDEX', 'embedding', '"ids"', '2.5');
    expectQkError(() => embedding([Number.NaN], table), QkIndexError, 'QK_INDEX', 'embedding', '"ids"');
    const ids = Tensor.fromArray([3, 4, 100000], { dtype: 'i32' });
    expectQkError(() => embedding(ids, table), QkIndexError, 'QK_INDEX', 'embedding', '"ids"', '100000');
  });

  it('rejects ids tensors that are not i32', () => {
    const ids = Tensor.fromArray([1, 2], { dtype: 'i8' });
    expectQkError(
      () => embedding(ids as never, table),
      QkDtypeError,
      'QK_DTYPE',
      'embedding',
      '"ids"',
      'i32',
      'i8',
    );
    const fids = Tensor.fromArray([1, 2]);
    expectQkError(
      () => embedding(fids as never, table),
      QkDtypeError,
      'QK_DTYPE',
      'embedding',
      '"ids"',
      'f32',
    );
  });

  it('rejects ids that are neither a tensor nor an array', () => {
    expectQkError(() => embedding(3 as never, table), QkValueError, 'QK_VALUE', 'embedding', '"ids"');
    expectQkError(() => embedding(null as never, table), QkValueError, 'QK_VALUE', 'embedding', '"ids"');
  });

  it('rejects a table that is not [vocab, hidden] floats', () => {
    expectQkError(
      () => embedding([0], randn([10], 'f32', 701)),
      QkShapeError,
      'QK_SHAPE',
      'embedding',
      '"table"',
    );
    expectQkError(
      () => embedding([0], randn([2, 3, 4], 'f32', 702)),
      QkShapeError,
      'QK_SHAPE',
      'embedding',
      '"table"',
    );
    const intTable = Tensor.zeros([10, 4], 'i32');
    expectQkError(
      () => embedding([0], intTable as never),
      QkDtypeError,
      'QK_DTYPE',
      'embedding',
      '"table"',
      'i32',
    );
  });

  it('rejects disposed tensors', () => {
    const gone = randn([10, 4], 'f32', 703);
    gone.dispose();
    expectQkError(() => embedding([0], gone), QkDisposedError, 'QK_DISPOSED', 'embedding', '"table"');
    const ids = Tensor.fromArray([0], { dtype: 'i32' });
    ids.dispose();
    expectQkError(() => embedding(ids, table), QkDisposedError, 'QK_DISPOSED', 'embedding', '"ids"');
  });
});
