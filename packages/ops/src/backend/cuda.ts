/**
 * Lazy access to the optional GPU backend, `@qk/cuda-core`. Nothing here runs until a tensor moves to
 * `'cuda'`; without the backend (not installed, not built, no driver, no GPU) the CPU path keeps working and the
 * first use of `'cuda'` throws one `QkDeviceError` that says why.
 */
import { createRequire } from 'node:module';
import type * as CudaCore from '@qk/cuda-core';
import type { Binding, DTypeCode } from '@qk/cuda-core';
import type { DType } from '../dtype.js';
import { QkCudaError, QkDeviceError, QkOutOfMemoryError } from '../errors.js';

/**
 * The binding's code tables, taken from the loaded `@qk/cuda-core` module: they are written once, in its
 * src/binding.ts, and `@qk/ops` imports only their types (the module itself is optional and loaded lazily).
 */
export type BindingCodes = Pick<
  typeof CudaCore,
  'DTypeCode' | 'UnaryOp' | 'BinaryOp' | 'Broadcast' | 'ActivationCode' | 'GluCode'
>;

const CODE_TABLES = [
  'DTypeCode',
  'UnaryOp',
  'BinaryOp',
  'Broadcast',
  'ActivationCode',
  'GluCode',
] as const satisfies readonly (keyof BindingCodes)[];

type CudaCoreModule = Pick<typeof CudaCore, 'loadBinding'> & BindingCodes;

let binding: Binding | undefined;
let codes: BindingCodes | undefined;
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
  codes = undefined;
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
  const missing = CODE_TABLES.filter((k) => typeof mod[k] !== 'object' || mod[k] === null);
  if (missing.length > 0) {
    unavailable = `device "cuda" is unavailable: the @qk/cuda-core module lacks ${missing.join(', ')}: install the @qk/cuda-core of this @qk/ops release.`;
    throw new QkDeviceError(unavailable);
  }
  let loaded: Binding;
  try {
    loaded = mod.loadBinding();
  } catch (e) {
    unavailable = `device "cuda" is unavailable: ${e instanceof Error ? e.message.replace(/^the CUDA backend is unavailable: /, '') : String(e)}.`;
    throw new QkDeviceError(unavailable);
  }
  codes = mod;
  binding = loaded;
  return binding;
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

/**
 * The binding's code tables (op codes, dtype codes) for `op`; throws `QkDeviceError`
 * (naming the op) when the GPU backend is unavailable.
 */
export function bindingCodes(op: string): BindingCodes {
  if (codes === undefined) cudaBinding(op);
  return codes!;
}

/** The binding's numeric code of a dtype. */
export function dtypeCode<D extends DType>(d: D): D extends 'f32' | 'f16' | 'bf16' ? 0 | 1 | 2 : DTypeCode {
  return bindingCodes('dtypeCode').DTypeCode[d] as never;
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
