/**
 * A block of GPU memory shared by a tensor and its views. It is freed (returned to the addon's caching
 * allocator) when the last tensor using it is disposed; tensors that are never disposed release it when they are
 * garbage-collected, as a safety net.
 */
import { cudaBinding, nativeCall } from './cuda.js';

export class DeviceBuffer {
  readonly ptr: bigint;
  readonly bytes: number;
  #refs = 1;

  private constructor(ptr: bigint, bytes: number) {
    this.ptr = ptr;
    this.bytes = bytes;
  }

  /** Allocates `bytes` (uninitialised) through the caching allocator. */
  static allocate(bytes: number, op: string): DeviceBuffer {
    const binding = cudaBinding(op);
    return new DeviceBuffer(
      nativeCall(op, () => binding.malloc(bytes)),
      bytes,
    );
  }

  retain(): this {
    this.#refs++;
    return this;
  }

  release(): void {
    if (this.#refs <= 0) return;
    if (--this.#refs === 0) cudaBinding('Tensor.dispose').free(this.ptr);
  }
}

/** Releases a tensor's reference to its buffer when the tensor is collected without `dispose()`. */
export const bufferFinalizer = new FinalizationRegistry<DeviceBuffer>((buffer) => buffer.release());
