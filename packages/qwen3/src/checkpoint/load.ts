/**
 * Loading a checkpoint's weights into tensors: check everything against the config first, then read, convert and
 * (for CUDA) upload one tensor at a time, so the JS heap never holds more than one tensor's bytes.
 */
import { type Device, type FloatDType, findNonFinite, nonFiniteStats, Tensor } from '@qk/ops';
import { QkAbortError, QkCheckpointError } from '../errors.js';
import { type Checkpoint, openCheckpoint } from '../safetensors/checkpoint.js';
import { floatDTypeOf } from '../safetensors/format.js';
import type { Qwen3Config, Qwen3Weights } from '../types.js';
import { safeText } from '../untrusted.js';
import { convertBytes } from './convert.js';
import { assembleWeights, checkpointProblems, expectedTensors } from './layout.js';

/** Progress of a load, reported after each tensor. */
export interface LoadProgress {
  /** Bytes of tensor data read so far (as stored in the files). */
  readonly loadedBytes: number;
  readonly totalBytes: number;
  /** HF name of the tensor just loaded. */
  readonly tensor: string;
}

/** Options of {@link loadWeights}. */
export interface LoadWeightsOptions<D extends FloatDType> {
  /** Dtype of the loaded tensors; each file dtype (BF16, F16, F32) is converted to it with round-to-nearest-even. */
  readonly dtype: D;
  /** Where the tensors live (default `'cpu'`). For `'cuda'` each tensor is uploaded and its host copy freed at once. */
  readonly device?: Device;
  readonly onProgress?: (progress: LoadProgress) => void;
  /** Checked between tensors; on abort the tensors loaded so far are disposed and `QkAbortError` is thrown. */
  readonly signal?: AbortSignal;
  /** Refuse a tensor holding NaN or ±Inf, naming it (default `false` here; `loadQwen3` turns it on). */
  readonly checkFinite?: boolean;
}

/** Index of the first NaN or ±Inf element of `storage` (f32 values, or bf16/f16 bit patterns), or -1. */
export function firstNonFinite(storage: ArrayLike<number>, dtype: FloatDType): number {
  return nonFiniteStats(storage, dtype).first;
}

/** The refusal of a tensor holding `count` non-finite values, the first at element `first`. */
function nonFiniteTensorError(name: string, count: number, first: number, dir: string): QkCheckpointError {
  return new QkCheckpointError(
    `tensor ${safeText(name)} holds ${count} non-finite value${count === 1 ? '' : 's'} (NaN or ±Inf), the first at element ${first}; the weights are corrupted, so every engine would produce NaN/Inf. Re-download or re-save the checkpoint (loadQwen3's checkWeights: false, or qk's --skip-checks, loads it anyway).`,
    dir,
  );
}

/**
 * Throws one `QkCheckpointError` listing every way the checkpoint disagrees with the config (missing and
 * unexpected tensors, wrong shapes, unloadable dtypes), or returns when it fits.
 */
export function assertCheckpointMatches(checkpoint: Checkpoint, config: Qwen3Config): void {
  const problems = checkpointProblems(checkpoint.tensors, config);
  if (problems.length === 0) return;
  throw new QkCheckpointError(
    `the checkpoint does not match its config: ${problems.join('; ')}. Check that config.json belongs to these safetensors (and that the model is a dense Qwen3).`,
    checkpoint.dir,
  );
}

function abortError(signal: AbortSignal): QkAbortError {
  return new QkAbortError('loading weights', signal.reason);
}

/**
 * Loads the weights of a Qwen3 checkpoint (a directory, or an open {@link Checkpoint}, which is left open).
 * Everything is checked before the first byte of tensor data is read, and every problem is reported in one error.
 *
 * @throws QkCheckpointError when the checkpoint is missing, corrupted, or does not match `config`;
 *   QkAbortError when `signal` fires (nothing loaded is leaked).
 */
export async function loadWeights<D extends FloatDType>(
  source: string | Checkpoint,
  config: Qwen3Config,
  options: LoadWeightsOptions<D>,
): Promise<Qwen3Weights<D>> {
  const { dtype, device = 'cpu', onProgress, signal } = options;
  if (signal?.aborted) throw abortError(signal);
  const checkpoint = typeof source === 'string' ? await openCheckpoint(source) : source;
  const loaded = new Map<string, Tensor<D>>();
  try {
    assertCheckpointMatches(checkpoint, config);
    const expected = expectedTensors(config);
    const totalBytes = expected.reduce((sum, t) => sum + checkpoint.tensors.get(t.name)!.byteLength, 0);
    let loadedBytes = 0;
    for (const { name } of expected) {
      if (signal?.aborted) throw abortError(signal);
      const raw = await checkpoint.readTensor(name);
      if (signal?.aborted) throw abortError(signal);
      const storage = convertBytes(raw.bytes, floatDTypeOf(raw.dtype)!, dtype);
      const host = Tensor.fromStorage(storage, raw.shape, dtype);
      let tensor = host;
      if (device !== 'cpu') {
        try {
          tensor = host.to(device);
        } finally {
          host.dispose();
        }
      }
      loaded.set(name, tensor);
      // The check runs where the tensor now lives: on the GPU one pass at memory speed (milliseconds for a whole
      // model), on the CPU a loop over the storage.
      if (options.checkFinite) {
        const { count, first } = findNonFinite(tensor);
        if (count > 0) throw nonFiniteTensorError(name, count, first, checkpoint.dir);
      }
      loadedBytes += raw.bytes.byteLength;
      onProgress?.({ loadedBytes, totalBytes, tensor: name });
    }
    return assembleWeights(config, (name) => loaded.get(name)!);
  } catch (e) {
    for (const t of loaded.values()) t.dispose();
    throw e;
  } finally {
    if (typeof source === 'string') await checkpoint.close();
  }
}
