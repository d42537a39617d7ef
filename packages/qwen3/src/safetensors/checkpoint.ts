/**
 * One view over the safetensors of a checkpoint directory: `model.safetensors`, or the shards that
 * `model.safetensors.index.json` lists, checked against each other before any tensor is read.
 */
import { readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { QkCheckpointError, QkLimitError } from '../errors.js';
import {
  describeValue,
  inspectPath,
  LIMITS,
  notReadableReason,
  quote,
  readUntrustedJson,
  safeText,
} from '../untrusted.js';
import type { RawTensor, SafetensorsTensorInfo } from './format.js';
import { openSafetensors, type SafetensorsFile } from './reader.js';

/** File names that transformers' `save_pretrained` writes. */
export const SINGLE_FILE_NAME = 'model.safetensors';
export const INDEX_FILE_NAME = 'model.safetensors.index.json';

/** A tensor of a checkpoint and the file that holds it. */
export interface CheckpointTensorInfo extends SafetensorsTensorInfo {
  /** Absolute path of the safetensors file. */
  readonly file: string;
}

/** The tensors of a (possibly sharded) checkpoint. Close it with `close()` (or `await using`). */
export interface Checkpoint {
  /** Absolute path of the directory (or of the single file that was opened). */
  readonly dir: string;
  /** Absolute paths of the safetensors files, in shard order. */
  readonly files: readonly string[];
  /** Every tensor of every file. */
  readonly tensors: ReadonlyMap<string, CheckpointTensorInfo>;
  /** `__metadata__` of the first file. */
  readonly metadata: Readonly<Record<string, string>>;
  /** Reads one tensor's bytes from its file. */
  readTensor(name: string): Promise<RawTensor>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

async function exists(path: string): Promise<'file' | 'dir' | undefined> {
  const info = await inspectPath(path);
  return info.kind === 'file' || info.kind === 'dir' ? info.kind : undefined;
}

/** Throws when `path` is there but cannot be read as a file (a dangling symlink, a FIFO, a directory). */
async function requireReadable(path: string): Promise<void> {
  const info = await inspectPath(path);
  if (info.kind !== 'file' && info.kind !== 'missing') {
    throw new QkCheckpointError(`${notReadableReason(info)}.`, path);
  }
}

/** Reads and checks the index: a `weight_map` of tensor name → shard file name inside the directory. */
async function readIndex(indexPath: string): Promise<Map<string, string>> {
  const json = await readUntrustedJson(
    indexPath,
    LIMITS.mediumJsonBytes,
    (reason) => new QkCheckpointError(`${reason}; re-download or re-save the checkpoint.`, indexPath),
  );
  const weightMap = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
    throw new QkCheckpointError('has no "weight_map" object mapping tensor names to shard files.', indexPath);
  }
  const names = Object.keys(weightMap).length;
  if (names > LIMITS.tensors) {
    throw new QkLimitError(indexPath, 'weight_map', `${LIMITS.tensors} tensors`, `lists ${names} tensors`);
  }
  const map = new Map<string, string>();
  for (const [name, shard] of Object.entries(weightMap)) {
    // A shard must be a plain file name in the same directory: an index must not point anywhere else on disk.
    if (typeof shard !== 'string' || shard !== basename(shard) || shard === '.' || shard === '..') {
      throw new QkCheckpointError(
        `maps tensor ${quote(name)} to ${describeValue(shard)}, which is not a file name in the checkpoint directory.`,
        indexPath,
      );
    }
    map.set(name, shard);
  }
  if (map.size === 0) throw new QkCheckpointError('has an empty weight_map.', indexPath);
  return map;
}

function checkpointView(dir: string, files: SafetensorsFile[]): Checkpoint {
  const tensors = new Map<string, CheckpointTensorInfo>();
  const byFile = new Map<string, SafetensorsFile>();
  for (const f of files) {
    byFile.set(f.path, f);
    for (const info of f.tensors.values()) tensors.set(info.name, Object.freeze({ ...info, file: f.path }));
  }
  const view: Checkpoint = {
    dir,
    files: Object.freeze(files.map((f) => f.path)),
    tensors,
    metadata: files[0]?.metadata ?? {},
    async readTensor(name: string): Promise<RawTensor> {
      const info = tensors.get(name);
      if (info === undefined) {
        throw new QkCheckpointError(`the checkpoint has no tensor named ${quote(name)}.`, dir);
      }
      return byFile.get(info.file)!.readTensor(name);
    },
    async close(): Promise<void> {
      await Promise.all(files.map((f) => f.close()));
    },
    [Symbol.asyncDispose](): Promise<void> {
      return view.close();
    },
  };
  return view;
}

async function openSharded(dir: string, indexPath: string): Promise<Checkpoint> {
  const weightMap = await readIndex(indexPath);
  const shardNames = [...new Set(weightMap.values())].sort();
  const missing: string[] = [];
  for (const shard of shardNames) {
    await requireReadable(join(dir, shard));
    if ((await exists(join(dir, shard))) !== 'file') missing.push(shard);
  }
  if (missing.length > 0) {
    throw new QkCheckpointError(
      `lists shard${missing.length > 1 ? 's' : ''} ${missing
        .slice(0, 10)
        .map((m) => safeText(m, 80))
        .join(
          ', ',
        )}${missing.length > 10 ? ` and ${missing.length - 10} more` : ''} that ${missing.length > 1 ? 'are' : 'is'} not in ${dir}; the download is incomplete.`,
      indexPath,
    );
  }
  const files: SafetensorsFile[] = [];
  try {
    let total = 0;
    for (const shard of shardNames) {
      const file = await openSafetensors(join(dir, shard));
      files.push(file);
      total += file.tensors.size;
      if (total > LIMITS.tensors) {
        throw new QkLimitError(
          indexPath,
          'the shards',
          `${LIMITS.tensors} tensors`,
          `hold ${total} tensors or more`,
        );
      }
    }
    const problems: string[] = [];
    const foundIn = new Map<string, string>();
    for (const f of files) {
      const shard = basename(f.path);
      for (const name of f.tensors.keys()) {
        const other = foundIn.get(name);
        if (other !== undefined) problems.push(`tensor ${quote(name)} is in both ${other} and ${shard}`);
        foundIn.set(name, shard);
        const mapped = weightMap.get(name);
        if (mapped === undefined)
          problems.push(`tensor ${quote(name)} is in ${shard} but not in the weight_map`);
        else if (mapped !== shard)
          problems.push(`tensor ${quote(name)} is in ${shard} but the weight_map says ${mapped}`);
      }
    }
    for (const [name, shard] of weightMap) {
      if (!foundIn.has(name))
        problems.push(`tensor ${quote(name)} is not in ${shard} where the weight_map says it is`);
    }
    if (problems.length > 0) {
      const shown = problems.slice(0, 20).join('; ');
      const more = problems.length > 20 ? `; and ${problems.length - 20} more` : '';
      throw new QkCheckpointError(
        `disagrees with its shards: ${shown}${more}. The checkpoint is corrupted or mixes files of different saves.`,
        indexPath,
      );
    }
    return checkpointView(dir, files);
  } catch (e) {
    await Promise.all(files.map((f) => f.close()));
    throw e;
  }
}

/**
 * Opens the safetensors of a checkpoint directory: `model.safetensors` when present (as transformers prefers),
 * else the shards listed by `model.safetensors.index.json`, which must all exist, hold exactly the tensors the
 * index assigns them, and share no tensor. A path to a `.safetensors` file opens that file alone.
 *
 * @throws QkCheckpointError when the directory is missing, holds neither file, or the files disagree.
 */
export async function openCheckpoint(path: string): Promise<Checkpoint> {
  const dir = resolve(path);
  const kind = await exists(dir);
  if (kind === undefined) {
    throw new QkCheckpointError(
      `no such directory; pass a checkpoint directory holding ${SINGLE_FILE_NAME}.`,
      dir,
    );
  }
  if (kind === 'file') {
    if (!dir.endsWith('.safetensors')) {
      throw new QkCheckpointError(
        `is a file; pass the checkpoint directory (with ${SINGLE_FILE_NAME} or ${INDEX_FILE_NAME}) or a .safetensors file.`,
        dir,
      );
    }
    return checkpointView(dir, [await openSafetensors(dir)]);
  }
  const single = join(dir, SINGLE_FILE_NAME);
  await requireReadable(single);
  if ((await exists(single)) === 'file') return checkpointView(dir, [await openSafetensors(single)]);
  const index = join(dir, INDEX_FILE_NAME);
  await requireReadable(index);
  if ((await exists(index)) === 'file') return openSharded(dir, index);
  const others = (await readdir(dir)).filter((n) => n.endsWith('.safetensors'));
  throw new QkCheckpointError(
    `has neither ${SINGLE_FILE_NAME} nor ${INDEX_FILE_NAME}${
      others.length > 0
        ? ` (it has ${others
            .slice(0, 5)
            .map((o) => safeText(o, 80))
            .join(
              ', ',
            )}${others.length > 5 ? ', …' : ''}, but without an index qk cannot tell how they fit together)`
        : ''
    }; point at a directory saved by transformers' save_pretrained or by qk model init.`,
    dir,
  );
}
