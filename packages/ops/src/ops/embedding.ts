import { checkFloat, checkRank, checkTensor } from '../check.js';
import { writeCpuOutput } from '../cuda/common.js';
import { cudaEmbedding } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { QkDeviceError, QkDtypeError, QkIndexError, QkValueError } from '../errors.js';
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

/** Options of {@link embedding}. */
export interface EmbeddingOptions {
  /** Write the result here (shape `[...ids.shape, hidden]`, the table's dtype and device) instead of a new tensor. */
  out?: Tensor;
}

/**
 * Embedding lookup: row `ids[i]` of `table` (`[vocab, hidden]`) for each id. Returns `[...ids.shape, hidden]`
 * with the table's dtype; rows are copied bit-exactly (no rounding).
 *
 * With the table on `'cuda'`, host ids (an array or a CPU i32 tensor) are checked against the vocabulary and
 * uploaded; ids already in an i32 CUDA tensor are used as they are, without reading them back: the caller vouches
 * that they lie in `[0, vocab)` (an id outside it yields a row of zeros, never a read outside the table).
 */
export function embedding<D extends FloatDType>(
  ids: TokenIds,
  table: Tensor<D>,
  options: EmbeddingOptions = {},
): Tensor<D> {
  const op = 'embedding';
  checkFloat(op, 'table', table);
  checkRank(op, 'table', table, 2, 'table is [vocab, hidden]');
  const [vocab, hidden] = table.shape as [number, number];
  if (ids instanceof Tensor && ids.device === 'cuda') {
    checkTensor(op, 'ids', ids);
    if (ids.dtype !== 'i32') throw new QkDtypeError({ op, arg: 'ids', expected: 'i32', got: ids.dtype });
    if (table.device !== 'cuda') {
      throw new QkDeviceError(
        'argument "ids" is on "cuda" but "table" is on "cpu": move them to one device with .to().',
        op,
      );
    }
    return cudaEmbedding(ids as Tensor<'i32'>, ids.shape, table, options.out);
  }
  const { values, shape } = readTokenIds(op, ids, vocab);
  if (table.device === 'cuda') {
    const host = values instanceof Int32Array ? values : Int32Array.from(values);
    return cudaEmbedding(host, shape, table, options.out);
  }
  const src = table.data;
  const out = Tensor.zeros([...shape, hidden], table.dtype);
  const dst = out.data;
  for (let i = 0; i < values.length; i++) {
    const row = values[i]! * hidden;
    dst.set(src.subarray(row, row + hidden), i * hidden);
  }
  return writeCpuOutput(op, out, options.out);
}
