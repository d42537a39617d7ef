/**
 * Writing safetensors one tensor at a time. The header must precede the data, so the writer takes every tensor's
 * name, dtype and shape up front and asks for each tensor's bytes only when it is that tensor's turn: a model
 * larger than the JS heap can be written as long as one tensor fits.
 */
import { type FileHandle, mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { QkAbortError, QkCheckpointError } from '../errors.js';
import { INDEX_FILE_NAME, SINGLE_FILE_NAME } from './checkpoint.js';
import { encodeHeader, specByteLength, type TensorSpec } from './format.js';

/** A tensor to write with its bytes, or a function that produces them when the writer reaches it. */
export interface WritableTensor extends TensorSpec {
  readonly bytes: Uint8Array | (() => Uint8Array | Promise<Uint8Array>);
}

/** A tensor with its bytes, as an iterable source yields it. */
export interface TensorEntry extends TensorSpec {
  readonly bytes: Uint8Array;
}

/**
 * What to write: a list of tensors (bytes given or produced on demand), or the list of specs plus an (async)
 * iterable that yields the same tensors, in the same order, with their bytes.
 */
export type TensorSource =
  | readonly WritableTensor[]
  | {
      readonly specs: readonly TensorSpec[];
      readonly entries: Iterable<TensorEntry> | AsyncIterable<TensorEntry>;
    };

/** Progress of a write, reported after each tensor. */
export interface WriteProgress {
  readonly writtenBytes: number;
  readonly totalBytes: number;
  /** The tensor just written. */
  readonly tensor: string;
}

/** Options of {@link writeSafetensors}. */
export interface WriteSafetensorsOptions {
  /** The header's `__metadata__` (default `{ format: 'pt' }`, which transformers requires to load a file). */
  readonly metadata?: Readonly<Record<string, string>>;
  readonly onProgress?: (progress: WriteProgress) => void;
  /** Checked between tensors; aborting removes the partly written file and throws `QkAbortError`. */
  readonly signal?: AbortSignal;
}

/** Options of {@link writeShardedSafetensors}. */
export interface WriteShardedOptions extends WriteSafetensorsOptions {
  /** Start a new shard before a tensor that would take a shard past this many bytes (default 5 GiB). */
  readonly maxShardBytes?: number;
}

/** What {@link writeShardedSafetensors} wrote. */
export interface ShardedWriteResult {
  /** Absolute paths of the safetensors files. */
  readonly files: readonly string[];
  /** Path of `model.safetensors.index.json`, when the tensors were sharded. */
  readonly index?: string;
  /** Bytes of tensor data (headers excluded), the index's `total_size`. */
  readonly totalBytes: number;
}

const DEFAULT_METADATA: Readonly<Record<string, string>> = Object.freeze({ format: 'pt' });
/** Default shard bound; transformers' default `max_shard_size` is of the same order. */
export const DEFAULT_MAX_SHARD_BYTES = 5 * 2 ** 30;
/** Node refuses single writes above 2 GiB − 1. */
const MAX_WRITE_BYTES = 1 << 30;

function specsOf(source: TensorSource): readonly TensorSpec[] {
  return Array.isArray(source) ? source : (source as { specs: readonly TensorSpec[] }).specs;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Yields each spec's bytes in order, checking that an iterable source keeps to the specs it announced. */
async function* bytesInOrder(source: TensorSource): AsyncGenerator<Uint8Array> {
  if (Array.isArray(source)) {
    for (const t of source as readonly WritableTensor[]) {
      yield typeof t.bytes === 'function' ? await t.bytes() : t.bytes;
    }
    return;
  }
  const { specs, entries } = source as Exclude<TensorSource, readonly WritableTensor[]>;
  let i = 0;
  for await (const entry of entries) {
    const spec = specs[i];
    if (spec === undefined) {
      throw new QkCheckpointError(
        `the source yielded tensor "${entry.name}" after the ${specs.length} announced.`,
      );
    }
    if (entry.name !== spec.name || entry.dtype !== spec.dtype || !sameShape(entry.shape, spec.shape)) {
      throw new QkCheckpointError(
        `the source yielded ${entry.name} (${entry.dtype} [${entry.shape.join(', ')}]) where its specs announced ${spec.name} (${spec.dtype} [${spec.shape.join(', ')}]); yield tensors in the order of the specs.`,
      );
    }
    yield entry.bytes;
    i++;
  }
  if (i !== specs.length) {
    throw new QkCheckpointError(`the source ended after ${i} tensors; its specs announced ${specs.length}.`);
  }
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await handle.write(bytes, done, Math.min(bytes.length - done, MAX_WRITE_BYTES));
    done += bytesWritten;
  }
}

interface FileJob {
  readonly path: string;
  readonly specs: readonly TensorSpec[];
  readonly metadata: Readonly<Record<string, string>>;
  readonly next: AsyncIterator<Uint8Array>;
  readonly progress: { written: number; readonly total: number };
  readonly options: WriteSafetensorsOptions;
}

/** Writes one file from the shared byte stream, under a temporary name so a failed write leaves nothing valid-looking. */
async function writeOneFile(job: FileJob): Promise<void> {
  const header = encodeHeader(job.specs, job.metadata);
  const partial = `${job.path}.partial`;
  const handle = await open(partial, 'w');
  try {
    await writeAll(handle, header);
    for (const spec of job.specs) {
      if (job.options.signal?.aborted)
        throw new QkAbortError('writing safetensors', job.options.signal.reason);
      const { value, done } = await job.next.next();
      if (done) throw new QkCheckpointError(`no bytes were produced for tensor "${spec.name}".`, job.path);
      const expected = specByteLength(spec);
      if (!(value instanceof Uint8Array) || value.length !== expected) {
        throw new QkCheckpointError(
          `tensor "${spec.name}" (${spec.dtype} [${spec.shape.join(', ')}]) needs ${expected} bytes, got ${value instanceof Uint8Array ? value.length : typeof value}.`,
          job.path,
        );
      }
      await writeAll(handle, value);
      job.progress.written += expected;
      job.options.onProgress?.({
        writtenBytes: job.progress.written,
        totalBytes: job.progress.total,
        tensor: spec.name,
      });
    }
    await handle.close();
    await rename(partial, job.path);
  } catch (e) {
    await handle.close().catch(() => {});
    await rm(partial, { force: true });
    throw e;
  }
}

function totalBytesOf(specs: readonly TensorSpec[]): number {
  return specs.reduce((sum, s) => sum + specByteLength(s), 0);
}

/**
 * Writes one safetensors file, tensors in the given order, the header padded with spaces to 8 bytes. Only one
 * tensor's bytes are held at a time when the source produces them on demand.
 *
 * @throws QkCheckpointError for a bad spec (unknown dtype, duplicate name), bytes of the wrong length, or a
 *   source that strays from its specs; QkAbortError when `signal` fires. Nothing is left at `path` on failure.
 */
export async function writeSafetensors(
  path: string,
  source: TensorSource,
  options: WriteSafetensorsOptions = {},
): Promise<void> {
  const specs = specsOf(source);
  const next = bytesInOrder(source);
  try {
    await writeOneFile({
      path,
      specs,
      metadata: options.metadata ?? DEFAULT_METADATA,
      next,
      progress: { written: 0, total: totalBytesOf(specs) },
      options,
    });
  } finally {
    await next.return(undefined);
  }
}

/** Splits `specs` into runs of at most `maxBytes` (a tensor larger than that gets a shard of its own). */
function planShards(specs: readonly TensorSpec[], maxBytes: number): TensorSpec[][] {
  const shards: TensorSpec[][] = [];
  let current: TensorSpec[] = [];
  let bytes = 0;
  for (const spec of specs) {
    const size = specByteLength(spec);
    if (current.length > 0 && bytes + size > maxBytes) {
      shards.push(current);
      current = [];
      bytes = 0;
    }
    current.push(spec);
    bytes += size;
  }
  if (current.length > 0 || shards.length === 0) shards.push(current);
  return shards;
}

/** transformers' shard names: `model-00001-of-00003.safetensors`. */
export function shardFileName(index: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, '0');
  return `model-${pad(index + 1)}-of-${pad(count)}.safetensors`;
}

/**
 * Writes the tensors into `dir` as transformers does: `model.safetensors` when they fit in `maxShardBytes`,
 * else `model-0000k-of-0000N.safetensors` shards plus `model.safetensors.index.json` (`metadata.total_size` and a
 * `weight_map` of tensor name → shard). Creates `dir` if needed; overwrites files of those names.
 */
export async function writeShardedSafetensors(
  dir: string,
  source: TensorSource,
  options: WriteShardedOptions = {},
): Promise<ShardedWriteResult> {
  const maxShardBytes = options.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes <= 0) {
    throw new QkCheckpointError(`maxShardBytes must be a positive integer, got ${maxShardBytes}.`, dir);
  }
  const specs = specsOf(source);
  const totalBytes = totalBytesOf(specs);
  const shards = planShards(specs, maxShardBytes);
  await mkdir(dir, { recursive: true });
  const names =
    shards.length === 1 ? [SINGLE_FILE_NAME] : shards.map((_, i) => shardFileName(i, shards.length));
  const next = bytesInOrder(source);
  const progress = { written: 0, total: totalBytes };
  const files: string[] = [];
  try {
    for (const [i, shardSpecs] of shards.entries()) {
      const path = join(dir, names[i]!);
      await writeOneFile({
        path,
        specs: shardSpecs,
        metadata: options.metadata ?? DEFAULT_METADATA,
        next,
        progress,
        options,
      });
      files.push(path);
    }
  } catch (e) {
    // A half-written set of shards is worse than none: it would load as "missing tensors" later.
    await Promise.all(files.map((f) => rm(f, { force: true })));
    throw e;
  } finally {
    await next.return(undefined);
  }
  if (shards.length === 1) return { files, totalBytes };
  const weightMap: Record<string, string> = {};
  shards.forEach((shardSpecs, i) => {
    for (const spec of shardSpecs) weightMap[spec.name] = names[i]!;
  });
  const sortedMap = Object.fromEntries(
    Object.entries(weightMap).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  const index = join(dir, INDEX_FILE_NAME);
  await writeFile(
    index,
    `${JSON.stringify({ metadata: { total_size: totalBytes }, weight_map: sortedMap }, null, 2)}\n`,
  );
  return { files, index, totalBytes };
}
