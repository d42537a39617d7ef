import { checkFloat, checkRank, checkSameDtype, checkTensor, commonDevice } from '../check.js';
import { cudaEmbedding, cudaScatterRows } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { QkDeviceError, QkDtypeError, QkIndexError, QkValueError } from '../errors.js';
import { writeCpuOutput } from '../io.js';
import { formatShape, shapeSize } from '../shape.js';
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

/**
 * The inverse of {@link embedding}: writes row `i` of `src` (`[count, ...row]`) into row `index[i]` of `dst`
 * (`[rows, ...row]`), in place, and returns `dst`. This is how new keys and values enter a KV cache; with `index`
 * in an i32 CUDA tensor the positions are read when the kernel runs, so a captured CUDA graph appends at whatever
 * position the tensor holds at replay. Host indices are checked against `rows`; indices already on the device are
 * not read back: one outside `[0, rows)` writes nothing. Rows are copied bit-exactly.
 */
export function scatterRows<D extends FloatDType>(
  dst: Tensor<D>,
  src: Tensor<NoInfer<D>>,
  index: TokenIds,
): Tensor<D> {
  const op = 'scatterRows';
  checkFloat(op, 'dst', dst);
  checkFloat(op, 'src', src);
  checkSameDtype(op, 'src', src, dst, 'dst');
  if (dst.rank < 1 || src.rank !== dst.rank || src.shape.slice(1).some((d, i) => d !== dst.shape[i + 1])) {
    throw new QkValueError(
      op,
      'src',
      `has shape ${formatShape(src.shape)}; it must be [count, ${dst.shape.slice(1).join(', ')}] to match rows of dst ${formatShape(dst.shape)}.`,
    );
  }
  const rows = dst.shape[0]!;
  const rowElems = shapeSize(dst.shape.slice(1));
  const count = src.shape[0]!;
  const onDevice = index instanceof Tensor && index.device === 'cuda';
  const values = onDevice ? undefined : readTokenIds(op, index, rows).values;
  const indexCount = onDevice ? (index as Tensor).size : values!.length;
  if (indexCount !== count) {
    throw new QkValueError(op, 'index', `holds ${indexCount} positions for ${count} rows of src.`);
  }
  if (commonDevice(op, { dst, src, ...(onDevice ? { index: index as Tensor } : {}) }) === 'cuda') {
    const idx = onDevice ? (index as Tensor<'i32'>) : Int32Array.from(values!);
    return cudaScatterRows(dst, src as Tensor<D>, idx, rows, rowElems);
  }
  for (let i = 0; i < count; i++) {
    dst.data.set(src.data.subarray(i * rowElems, (i + 1) * rowElems), values![i]! * rowElems);
  }
  return dst;
}
