/**
 * The CUDA runtime as `@qk/ops` users see it: device facts, the allocator's counters, stream synchronisation,
 * timing events and CUDA graphs. Every op runs on one stream per process, in call order.
 */
import { QkValueError } from '../errors.js';
import { cudaBinding, nativeCall } from './cuda.js';

/** The GPU that `'cuda'` tensors live on. */
export interface CudaDeviceInfo {
  name: string;
  computeCapability: { major: number; minor: number };
  multiProcessors: number;
  totalMemoryBytes: number;
  freeMemoryBytes: number;
  l2CacheBytes: number;
  driverVersion: number;
  runtimeVersion: number;
}

/** Counters of the caching device allocator. */
export interface CudaMemoryStats {
  allocatedBytes: number;
  reservedBytes: number;
  peakAllocatedBytes: number;
  /** Stays constant once a workload's buffers are cached: the hot path does not call cudaMalloc. */
  cudaMallocCalls: number;
  cacheHits: number;
  liveBlocks: number;
}

export function cudaDeviceInfo(): CudaDeviceInfo {
  const op = 'cudaDeviceInfo';
  const info = nativeCall(op, () => cudaBinding(op).deviceInfo());
  const [major, minor] = info.computeCapability.split('.').map(Number) as [number, number];
  return {
    name: info.name,
    computeCapability: { major, minor },
    multiProcessors: info.multiProcessors,
    totalMemoryBytes: info.totalMemoryBytes,
    freeMemoryBytes: info.freeMemoryBytes,
    l2CacheBytes: info.l2CacheBytes,
    driverVersion: info.driverVersion,
    runtimeVersion: info.runtimeVersion,
  };
}

export function cudaMemoryStats(): CudaMemoryStats {
  return nativeCall('cudaMemoryStats', () => cudaBinding('cudaMemoryStats').memoryStats());
}

/** Returns every cached, unused device block to CUDA. */
export function cudaEmptyCache(): void {
  nativeCall('cudaEmptyCache', () => cudaBinding('cudaEmptyCache').emptyCache());
}

/** Waits until every op queued so far has finished (and surfaces asynchronous CUDA errors). */
export function cudaSynchronize(): void {
  nativeCall('cudaSynchronize', () => cudaBinding('cudaSynchronize').synchronize());
}

/** A timing event on the op stream. `elapsedMs(start, end)` waits for `end`. */
export class CudaEvent {
  #handle: number | null;
  constructor() {
    this.#handle = nativeCall('CudaEvent', () => cudaBinding('CudaEvent').eventCreate());
  }
  #live(op: string): number {
    if (this.#handle === null) throw new QkValueError(op, 'event', 'was disposed.');
    return this.#handle;
  }
  /** Records the event after the ops queued so far. */
  record(): this {
    const h = this.#live('CudaEvent.record');
    nativeCall('CudaEvent.record', () => cudaBinding('CudaEvent.record').eventRecord(h));
    return this;
  }
  /** Milliseconds of GPU time between two recorded events. */
  static elapsedMs(start: CudaEvent, end: CudaEvent): number {
    const op = 'CudaEvent.elapsedMs';
    const [a, b] = [start.#live(op), end.#live(op)];
    return nativeCall(op, () => cudaBinding(op).eventElapsedMs(a, b));
  }
  dispose(): void {
    if (this.#handle === null) return;
    const h = this.#handle;
    this.#handle = null;
    nativeCall('CudaEvent.dispose', () => cudaBinding('CudaEvent.dispose').eventDestroy(h));
  }
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * A captured sequence of ops replayed with one launch. Tensors the captured ops read and write must stay alive
 * (not disposed) as long as the graph is replayed: the graph holds their addresses, not the tensors. Temporaries
 * that ops allocate and free inside the capture (scratch of an unfused op, say) are the exception: the allocator
 * keeps their memory reserved for the graph until `dispose()`, so no later tensor can land on an address the
 * graph still writes.
 */
export class CudaGraph {
  #handle: number | null;
  private constructor(handle: number) {
    this.#handle = handle;
  }

  /**
   * Captures the CUDA work that `record` queues (ops on CUDA tensors; no host copies) into a graph. The ops are
   * recorded, not executed: replay the graph to run them.
   */
  static capture(record: () => void): CudaGraph {
    const op = 'CudaGraph.capture';
    const b = cudaBinding(op);
    nativeCall(op, () => b.captureBegin());
    try {
      record();
    } catch (e) {
      // End the capture so the stream is usable again, then report the original failure.
      try {
        const h = b.captureEnd();
        b.graphDestroy(h);
      } catch {
        // the capture was already invalidated by the failure
      }
      throw e;
    }
    return new CudaGraph(nativeCall(op, () => b.captureEnd()));
  }

  /** Queues one replay of the captured ops on the op stream. */
  replay(): void {
    const op = 'CudaGraph.replay';
    if (this.#handle === null) throw new QkValueError(op, 'graph', 'was disposed.');
    const h = this.#handle;
    nativeCall(op, () => cudaBinding(op).graphLaunch(h));
  }

  dispose(): void {
    if (this.#handle === null) return;
    const h = this.#handle;
    this.#handle = null;
    nativeCall('CudaGraph.dispose', () => cudaBinding('CudaGraph.dispose').graphDestroy(h));
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
