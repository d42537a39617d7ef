import { checkFloat, checkRank, checkTensor } from '../check.js';
import type { FloatDType } from '../dtype.js';
import { QkDtypeError, QkIndexError, QkValueError } from '../errors.js';
import { Tensor } from '../tensor.js';

/** Token ids as an i32 tensor (any shape) or a flat array of integers. */
export type TokenIds = Tensor<'i32'> | ArrayLike<number>;

/** Reads token ids and their shape, checking every id against the vocabulary size. */
export function readTokenIds(
  op: string,
  ids: TokenIds,
  vocab: number,
): { values: ArrayLike<number>; shape: readonly number[] } {
  let values: ArrayLike<number>;
  let shape: readonly number[];
  if (ids instanceof Tensor) {
    checkTensor(op, 'ids', ids);
    if (ids.dtype !== 'i32') throw new QkDtypeError({ op, arg: 'ids', expected: 'i32', got: ids.dtype });
    values = ids.data as Int32Array;
    shape = ids.shape;
  } else if (ids !== null && typeof ids === 'object' && typeof ids.length === 'number') {
    values = ids;
    shape = [ids.length];
  } else {
    throw new QkValueError(op, 'ids', 'must be an i32 tensor or an array of integers.');
  }
  for (let i = 0; i < values.length; i++) {
    const id = values[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= vocab) {
      throw new QkIndexError(
        op,
        'ids',
        id,
        vocab,
        `at position ${i}: token ids must lie within the vocabulary`,
      );
    }
  }
  return { values, shape };
}

/**
 * Embedding lookup: row `ids[i]` of `table` (`[vocab, hidden]`) for each id. Returns `[...ids.shape, hidden]`
 * with the table's dtype; rows are copied bit-exactly (no rounding).
 */
export function embedding<D extends FloatDType>(ids: TokenIds, table: Tensor<D>): Tensor<D> {
  const op = 'embedding';
  checkFloat(op, 'table', table);
  checkRank(op, 'table', table, 2, 'table is [vocab, hidden]');
  const [vocab, hidden] = table.shape as [number, number];
  const { values, shape } = readTokenIds(op, ids, vocab);
  const src = table.data;
  const out = Tensor.zeros([...shape, hidden], table.dtype);
  const dst = out.data;
  for (let i = 0; i < values.length; i++) {
    const row = values[i]! * hidden;
    dst.set(src.subarray(row, row + hidden), i * hidden);
  }
  return out;
}
