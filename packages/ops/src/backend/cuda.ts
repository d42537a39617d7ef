/**
 * Lazy access to the optional GPU backend, `@qk/cuda-core`. Nothing here runs until a tensor moves to
 * `'cuda'`; without the backend (not installed, not built, no driver, no GPU) the CPU path keeps working and the
 * first use of `'cuda'` throws one `QkDeviceError` that says why.
 */
import { createRequire } from 'node:module';
import type { Binding, DTypeCode } from '@qk/cuda-core';
import type { DType } from '../dtype.js';
import { QkCudaError, QkDeviceError, QkOutOfMemoryError } from '../errors.js';

type CudaCoreModule = { loadBinding(): Binding };

let binding: Binding | undefined;
let unavailable: string | undefined;
let registered: CudaCoreModule | undefined;

function isCudaCoreModule(m: unknown): m is CudaCoreModule {
  return typeof m === 'object' && m !== null && typeof (m as CudaCoreModule).loadBinding === 'function';
}

/**
 * Uses this `@qk/cuda-core` module as the GPU backend (bundled apps pass `await import('@qk/cuda-core')`, since
 * a bundle cannot resolve the package lazily). Libraries normally never call it.
 */
export function useCudaBackend(cudaCore: unknown): void {
  if (!isCudaCoreModule(cudaCore)) {
    throw new QkDeviceError(
      'useCudaBackend expects the @qk/cuda-core module (an object with loadBinding()).',
    );
  }
  registered = cudaCore;
  binding = undefined;
  unavailable = undefined;
}

function load(): Binding {
  if (binding !== undefined) return binding;
  if (unavailable !== undefined) throw new QkDeviceError(unavailable);
  let mod: CudaCoreModule | undefined = registered;
  if (mod === undefined) {
    try {
      mod = createRequire(import.meta.url)('@qk/cuda-core') as CudaCoreModule;
    } catch {
      unavailable =
        'device "cuda" needs the GPU backend @qk/cuda-core, which is not installed: add it to your project (building it needs the CUDA toolkit); tensors can stay on "cpu".';
      throw new QkDeviceError(unavailable);
    }
  }
  try {
    binding = mod.loadBinding();
    return binding;
  } catch (e) {
    unavailable = `device "cuda" is unavailable: ${e instanceof Error ? e.message.replace(/^the CUDA backend is unavailable: /, '') : String(e)}.`;
    throw new QkDeviceError(unavailable);
  }
}

/** The native binding for `op`; throws `QkDeviceError` (naming the op) when the GPU backend is unavailable. */
export function cudaBinding(op: string): Binding {
  try {
    return load();
  } catch (e) {
    if (e instanceof QkDeviceError) throw new QkDeviceError(e.message, op);
    throw e;
  }
}

/** Whether `'cuda'` tensors can be used here, and if not, why. Never throws. */
export function cudaStatus(): { available: boolean; reason?: string } {
  try {
    load();
    return { available: true };
  } catch (e) {
    return { available: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

/** True when `'cuda'` tensors work on this machine. Never throws. */
export function cudaAvailable(): boolean {
  return cudaStatus().available;
}

const CODES: Record<DType, DTypeCode> = { f32: 0, f16: 1, bf16: 2, i32: 3, i8: 4, u8: 5 };

/** The binding's numeric code of a dtype. */
export function dtypeCode<D extends DType>(d: D): D extends 'f32' | 'f16' | 'bf16' ? 0 | 1 | 2 : DTypeCode {
  return CODES[d] as never;
}

/** Runs a native call, turning the binding's CUDA and out-of-memory errors into typed qk errors. */
export function nativeCall<T>(op: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    const err = e as {
      code?: string;
      message?: string;
      requested?: number;
      free?: number;
      total?: number;
      cudaError?: string;
    };
    if (err?.code === 'QK_OOM') {
      throw new QkOutOfMemoryError(op, err.requested ?? 0, err.free ?? 0, err.total ?? 0);
    }
    if (err?.code === 'QK_CUDA')
      throw new QkCudaError(op, err.cudaError ?? 'cudaErrorUnknown', err.message ?? String(e));
    throw e;
  }
}
