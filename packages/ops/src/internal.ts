/**
 * `@qk/ops/internal`: the GPU backend's plumbing, for the @qk packages that drive native functions of their own
 * through the addon `@qk/ops` loads (the Qwen3 decode megakernel of @qk/qwen3). Not a public API: it moves with
 * `@qk/ops` releases and promises nothing beyond them.
 *
 * Its types name no `@qk/cuda-core` type, since a consumer of `@qk/ops` need not have the optional addon installed:
 * a caller that wants the binding or the module typed imports those types from `@qk/cuda-core` itself and asserts
 * them on {@link cudaAddon} and {@link cudaAddonModule}.
 */
import { bindingCodes, cudaBinding } from './backend/cuda.js';

export { nativeCall } from './backend/cuda.js';
export { checkShape } from './check.js';
export { cudaInvFreq } from './cuda/elementwise.js';
export { deviceAddress } from './tensor.js';

/**
 * The loaded native binding (`Binding` of @qk/cuda-core), the one every `'cuda'` tensor and op of this `@qk/ops`
 * uses. Loads it on first use.
 *
 * @throws QkDeviceError naming `op` when the GPU backend is unavailable (with the reason).
 */
export function cudaAddon(op: string): object {
  return cudaBinding(op);
}

/** The loaded `@qk/cuda-core` module, for its code tables (`DTypeCode`, …); throws as {@link cudaAddon}. */
export function cudaAddonModule(op: string): object {
  return bindingCodes(op);
}
