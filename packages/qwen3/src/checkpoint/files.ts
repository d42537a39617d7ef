/**
 * Checkpoint directories as a whole: writing a random one that transformers can load (config, generation config,
 * safetensors, tokenizer), and describing an existing one.
 */
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { FloatDType } from '@qk/ops';
import { configToHfJson, parameterCount, parseQwen3Config } from '../config.js';
import { QkCheckpointError } from '../errors.js';
import { INDEX_FILE_NAME, openCheckpoint, SINGLE_FILE_NAME } from '../safetensors/checkpoint.js';
import { safetensorsDTypeOf } from '../safetensors/format.js';
import {
  DEFAULT_MAX_SHARD_BYTES,
  type WriteProgress,
  writeShardedSafetensors,
} from '../safetensors/writer.js';
import { bundledTokenizerFiles } from '../tokenizer/files.js';
import type { Qwen3Config } from '../types.js';
import { LIMITS, readUntrustedJson } from '../untrusted.js';
import { checkpointProblems, expectedTensors, LM_HEAD_NAME } from './layout.js';
import { randomTensorBytes } from './random.js';

/** The tokenizer files a Qwen3 checkpoint carries, as `save_pretrained` names them. */
export const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json'] as const;

/** Options of {@link writeRandomCheckpoint}. */
export interface WriteRandomCheckpointOptions {
  /** Seed of the weights (default 0); see {@link randomTensors}. */
  readonly seed?: number;
  /** Dtype of the stored tensors (default the config's `torchDtype`); `config.json`'s `torch_dtype` follows it. */
  readonly dtype?: FloatDType;
  /** Shard above this many bytes of tensor data (default 5 GiB), as transformers' `max_shard_size`. */
  readonly maxShardBytes?: number;
  /** Replace the checkpoint files of a non-empty directory (default `false`: refuse). */
  readonly overwrite?: boolean;
  /**
   * Directory holding `tokenizer.json` and `tokenizer_config.json` to copy (default: {@link bundledTokenizerDir}),
   * or `false` to write no tokenizer.
   */
  readonly tokenizerDir?: string | false;
  readonly onProgress?: (progress: WriteProgress) => void;
  /** Checked between tensors; aborting removes the partly written safetensors and throws `QkAbortError`. */
  readonly signal?: AbortSignal;
}

/** What {@link writeRandomCheckpoint} wrote. */
export interface RandomCheckpointSummary {
  /** Absolute path of the checkpoint directory. */
  readonly dir: string;
  /** Names of the files written, relative to `dir`. */
  readonly files: readonly string[];
  readonly parameters: number;
  /** Bytes of tensor data. */
  readonly tensorBytes: number;
  readonly dtype: FloatDType;
  readonly shards: number;
  /** Whether the tokenizer files were copied. */
  readonly tokenizer: boolean;
  /** Sentences worth showing the user (e.g. why the tokenizer is missing). */
  readonly notes: readonly string[];
}

/** Files a checkpoint write may replace: anything else in the directory is left alone. */
const CHECKPOINT_FILE =
  /^(model(-\d{5}-of-\d{5})?\.safetensors(\.partial)?|model\.safetensors\.index\.json|config\.json|generation_config\.json|tokenizer(_config)?\.json)$/;

/**
 * The directory of the bundled Qwen3 tokenizer files (`QK_TOKENIZER_DIR`, the CLI bundle's `tokenizer/` folder, or
 * the `tokenizer/` folder shipped in @qk/qwen3), or `undefined` when none can be found.
 */
export function bundledTokenizerDir(): string | undefined {
  const files = bundledTokenizerFiles();
  return files === undefined ? undefined : dirname(files.tokenizerJson);
}

/** The lock file a checkpoint write holds in its directory; a second writer fails clearly while it exists. */
export const WRITE_LOCK_NAME = '.qk-write.lock';
/** Prefix of the folder (inside the checkpoint directory) where a write puts its files before publishing them. */
const STAGING_PREFIX = '.qk-staging-';

function isOurs(name: string): boolean {
  return name === WRITE_LOCK_NAME || name.startsWith(STAGING_PREFIX);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the directory's write lock (a file created with O_EXCL holding our pid), so that two writers never
 * publish into one directory at once. A lock left by a process that no longer runs is taken over.
 *
 * @returns a function that releases it.
 * @throws QkCheckpointError naming the other writer.
 */
async function acquireWriteLock(dir: string): Promise<() => Promise<void>> {
  const lock = join(dir, WRITE_LOCK_NAME);
  const token = `${process.pid} ${Date.now()} ${Math.random().toString(36).slice(2)}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await writeFile(lock, `${token}\n`, { flag: 'wx' });
      return async () => {
        const held = await readFile(lock, 'utf8').catch(() => '');
        if (held.trim() === token) await rm(lock, { force: true });
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const held = await readFile(lock, 'utf8').catch(() => '');
      const pid = Number(held.split(' ')[0]);
      if (attempt === 0 && Number.isSafeInteger(pid) && pid > 0 && !processAlive(pid)) {
        await rm(lock, { force: true });
        continue;
      }
      throw new QkCheckpointError(
        `is being written by another process (${Number.isSafeInteger(pid) && pid > 0 ? `pid ${pid}` : 'unknown pid'}, lock file ${WRITE_LOCK_NAME}); wait for it to finish, or delete ${WRITE_LOCK_NAME} if no writer is running.`,
        dir,
      );
    }
  }
}

async function ensureDirectory(dir: string): Promise<void> {
  try {
    const s = await stat(dir);
    if (!s.isDirectory())
      throw new QkCheckpointError('exists and is not a directory; choose another --out.', dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    await mkdir(dir, { recursive: true });
  }
}

/** Checks (under the lock) that `dir` may be written: empty, or `overwrite`. */
async function checkWritable(dir: string, overwrite: boolean): Promise<void> {
  const entries = (await readdir(dir)).filter((n) => !isOurs(n));
  if (entries.length === 0 || overwrite) return;
  throw new QkCheckpointError(
    `is not empty (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}); choose an empty or new directory, or pass overwrite: true (qk model init --force) to replace its checkpoint files.`,
    dir,
  );
}

/**
 * Replaces the checkpoint files of `dir` with those in `staging`: stale shards of an earlier, differently sharded
 * write are removed first, then each file is renamed in (atomic per file, on one file system).
 */
async function publish(dir: string, staging: string, files: readonly string[]): Promise<void> {
  const entries = await readdir(dir);
  await Promise.all(
    entries.filter((n) => CHECKPOINT_FILE.test(n)).map((n) => rm(join(dir, n), { force: true })),
  );
  for (const name of files) await rename(join(staging, name), join(dir, name));
}

async function copyTokenizer(
  dir: string,
  from: string | false | undefined,
  notes: string[],
): Promise<string[]> {
  if (from === false) return [];
  const source = from ?? bundledTokenizerDir();
  if (source === undefined) {
    notes.push(
      'No tokenizer files were written: no bundled Qwen3 tokenizer was found (QK_TOKENIZER_DIR, a tokenizer/ folder beside the script, or the tokenizer/ folder of @qk/qwen3); copy tokenizer.json and tokenizer_config.json of any Qwen3 model into the directory.',
    );
    return [];
  }
  const copied: string[] = [];
  for (const name of TOKENIZER_FILES) {
    try {
      await copyFile(join(source, name), join(dir, name));
      copied.push(name);
    } catch (e) {
      notes.push(
        `${name} was not copied from ${source} (${(e as NodeJS.ErrnoException).code ?? String(e)}); copy it from any Qwen3 model.`,
      );
    }
  }
  return copied;
}

/** Qwen3's published generation defaults (thinking mode), for `generation_config.json`. */
function generationConfig(config: Qwen3Config): Record<string, unknown> {
  return {
    ...(config.bosTokenId !== undefined ? { bos_token_id: config.bosTokenId } : {}),
    do_sample: true,
    eos_token_id: [...config.eosTokenIds],
    ...(config.bosTokenId !== undefined ? { pad_token_id: config.bosTokenId } : {}),
    temperature: 0.6,
    top_k: 20,
    top_p: 0.95,
  };
}

/**
 * Writes a checkpoint directory of random weights for `config` that transformers' `AutoModelForCausalLM` and
 * qk both load: `config.json`, `generation_config.json`, the safetensors (sharded above `maxShardBytes`, with
 * `metadata.format = 'pt'`), and the Qwen3 tokenizer files when they can be found. Tensors are generated and
 * written one at a time, into a staging folder inside `dir` that only this call uses; the files are published into
 * `dir` once all are written, under a lock file ({@link WRITE_LOCK_NAME}) so that concurrent writers fail clearly
 * and never publish a mix of each other's files.
 *
 * @throws QkCheckpointError when `dir` is not empty (without `overwrite`), is locked by another writer, or cannot be
 *   written;
 *   QkAbortError when `signal` fires.
 */
export async function writeRandomCheckpoint(
  dir: string,
  config: Qwen3Config,
  options: WriteRandomCheckpointOptions = {},
): Promise<RandomCheckpointSummary> {
  const { seed = 0, dtype = config.torchDtype, overwrite = false } = options;
  const out = resolve(dir);
  await ensureDirectory(out);
  const release = await acquireWriteLock(out);
  const staging = join(out, `${STAGING_PREFIX}${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
  try {
    await checkWritable(out, overwrite);
    await mkdir(staging);
    const notes: string[] = [];
    const stDtype = safetensorsDTypeOf(dtype);
    const tensors = expectedTensors(config).map((t) => ({
      name: t.name,
      dtype: stDtype,
      shape: t.shape,
      bytes: () => randomTensorBytes(t, { seed, dtype }),
    }));
    const written = await writeShardedSafetensors(staging, tensors, {
      maxShardBytes: options.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
    await writeFile(join(staging, 'config.json'), json(configToHfJson({ ...config, torchDtype: dtype })));
    await writeFile(join(staging, 'generation_config.json'), json(generationConfig(config)));
    const tokenizerFiles = await copyTokenizer(staging, options.tokenizerDir, notes);
    const files = [
      'config.json',
      'generation_config.json',
      ...written.files.map((f) => basename(f)),
      ...(written.index ? [basename(written.index)] : []),
      ...tokenizerFiles,
    ];
    await publish(out, staging, files);
    return {
      dir: out,
      files,
      parameters: parameterCount(config),
      tensorBytes: written.totalBytes,
      dtype,
      shards: written.files.length,
      tokenizer: tokenizerFiles.length === TOKENIZER_FILES.length,
      notes,
    };
  } finally {
    await rm(staging, { recursive: true, force: true });
    await release();
  }
}

/** What {@link describeCheckpoint} found. */
export interface CheckpointDescription {
  /** Absolute path of the directory. */
  readonly dir: string;
  readonly config: Qwen3Config;
  /** Elements of the stored tensors (a tied model's redundant `lm_head.weight` is not counted). */
  readonly parameters: number;
  /** Bytes of the safetensors files on disk (headers included). */
  readonly bytes: number;
  /** Number of tensors per safetensors dtype, e.g. `{ BF16: 311 }`. */
  readonly dtypes: Readonly<Record<string, number>>;
  /** The safetensors files (and the index, when sharded), with their sizes. */
  readonly files: readonly { readonly name: string; readonly bytes: number }[];
  readonly tensors: number;
  /** Ways the tensors disagree with the config; empty when the checkpoint loads. */
  readonly problems: readonly string[];
}

/**
 * The parsed `config.json` of a checkpoint directory.
 *
 * @throws QkCheckpointError when the file is missing, unreadable or not JSON; QkConfigError when it is not a dense
 * Qwen3 config we support.
 */
export async function readCheckpointConfig(dir: string): Promise<Qwen3Config> {
  const file = join(dir, 'config.json');
  const json = await readUntrustedJson(
    file,
    LIMITS.configBytes,
    (reason) => new QkCheckpointError(`${reason}.`, file),
  );
  if (json === undefined) {
    throw new QkCheckpointError(
      'is missing: the directory has no config.json, which a Hugging Face Qwen3 checkpoint holds beside its *.safetensors.',
      file,
    );
  }
  return parseQwen3Config(json, file);
}

/**
 * Reads a checkpoint directory's `config.json` and safetensors headers (no tensor data) and summarises them.
 *
 * @throws QkCheckpointError when there is no `config.json` or the safetensors are missing or corrupted;
 *   QkConfigError when the config is not one qk can run.
 */
export async function describeCheckpoint(dir: string): Promise<CheckpointDescription> {
  const root = resolve(dir);
  const config = await readCheckpointConfig(root);
  const checkpoint = await openCheckpoint(root);
  try {
    const dtypes: Record<string, number> = {};
    let parameters = 0;
    for (const info of checkpoint.tensors.values()) {
      dtypes[info.dtype] = (dtypes[info.dtype] ?? 0) + 1;
      if (config.tieWordEmbeddings && info.name === LM_HEAD_NAME) continue;
      parameters += info.shape.reduce((a, b) => a * b, 1);
    }
    const paths = [...checkpoint.files];
    const sharded = !paths.some((p) => basename(p) === SINGLE_FILE_NAME);
    if (sharded && (await stat(join(root, INDEX_FILE_NAME)).catch(() => undefined))?.isFile()) {
      paths.push(join(root, INDEX_FILE_NAME));
    }
    const files = await Promise.all(
      paths.map(async (p) => ({ name: basename(p), bytes: (await stat(p)).size })),
    );
    return {
      dir: root,
      config,
      parameters,
      bytes: files.reduce((sum, f) => sum + f.bytes, 0),
      dtypes,
      files,
      tensors: checkpoint.tensors.size,
      problems: checkpointProblems(checkpoint.tensors, config),
    };
  } finally {
    await checkpoint.close();
  }
}
