/**
 * `@qk/cuda-core`: the native CUDA backend of qk. Most users never import it directly: `@qk/ops` loads it when a
 * tensor moves to `'cuda'`. It exposes the typed {@link Binding}, the loader, and device queries.
 */
import type { Binding, MemoryStats, NativeDeviceInfo } from './binding.js';
import { CudaUnavailableError, loadBinding } from './loader.js';

export * from './binding.js';
export {
  type AddonCandidate,
  type AddonOrigin,
  addonCandidateList,
  addonCandidates,
  CudaUnavailableError,
  loadBinding,
  loadedAddon,
  resetBindingCache,
} from './loader.js';

/** True when the addon is built, loads, and a CUDA device runs its code. Never throws. */
export function cudaAvailable(): boolean {
  return cudaStatus().available;
}

/** Whether the backend can be used, and if not, the one sentence saying why. Never throws. */
export function cudaStatus():
  | { available: true }
  | { available: false; reason: string; causes: readonly string[] } {
  try {
    loadBinding();
    return { available: true };
  } catch (e) {
    if (e instanceof CudaUnavailableError) return { available: false, reason: e.message, causes: e.causes };
    return { available: false, reason: String(e), causes: [String(e)] };
  }
}

/** The GPU in use. */
export interface DeviceInfo extends Omit<NativeDeviceInfo, 'computeCapability'> {
  computeCapability: { major: number; minor: number };
}

/** Name, multiprocessors, memory and compute capability of the GPU. Throws {@link CudaUnavailableError}. */
export function deviceInfo(): DeviceInfo {
  const info = loadBinding().deviceInfo();
  const [major, minor] = info.computeCapability.split('.').map(Number) as [number, number];
  return { ...info, computeCapability: { major, minor } };
}

/** The caching allocator's counters. */
export function memoryStats(): MemoryStats {
  return loadBinding().memoryStats();
}

export type { Binding };
