/**
 * GPU timing. A sample is the GPU time of a CUDA graph that replays `callsPerSample` calls of the op, divided
 * by that count: graphs remove the JS-to-native launch gaps, so the number is the kernels' own time. Each call
 * takes the next of several input sets whose total size exceeds twice the L2 cache, so no call finds its inputs
 * already cached. The PyTorch peers are timed the same way (torch.cuda.graph), so ratios compare like with like.
 */
import { CudaEvent, CudaGraph, cudaDeviceInfo, cudaSynchronize, Tensor } from '@qk/ops';
import { type Summary, summarize } from './stats.js';

export interface GpuTimingOptions {
  /** Op calls captured into one graph (default: enough for ~200 µs of work, at least 4). */
  callsPerSample?: number;
  /** Timed samples (default 25). */
  samples?: number;
  /** Untimed replays first (default 3). */
  warmup?: number;
}

/** Times `call(set)` cycling over `inputSets`; returns per-call microseconds. */
export function timeGpu<S>(
  inputSets: readonly S[],
  call: (set: S) => void,
  options: GpuTimingOptions = {},
): Summary {
  if (inputSets.length === 0) throw new Error('timeGpu: no input sets');
  // Estimate one call's time to size the graph.
  for (const s of inputSets) call(s);
  cudaSynchronize();
  const probeStart = new CudaEvent();
  const probeEnd = new CudaEvent();
  probeStart.record();
  for (const s of inputSets) call(s);
  probeEnd.record();
  const estimateUs = Math.max(0.5, (CudaEvent.elapsedMs(probeStart, probeEnd) * 1000) / inputSets.length);
  probeStart.dispose();
  probeEnd.dispose();
  const calls = options.callsPerSample ?? Math.max(4, Math.min(2000, Math.ceil(200 / estimateUs)));
  const graph = CudaGraph.capture(() => {
    for (let i = 0; i < calls; i++) call(inputSets[i % inputSets.length]!);
  });
  const start = new CudaEvent();
  const end = new CudaEvent();
  try {
    for (let i = 0; i < (options.warmup ?? 3); i++) graph.replay();
    const perCall: number[] = [];
    for (let i = 0; i < (options.samples ?? 25); i++) {
      start.record();
      graph.replay();
      end.record();
      perCall.push((CudaEvent.elapsedMs(start, end) * 1000) / calls);
    }
    return summarize(perCall);
  } finally {
    graph.dispose();
    start.dispose();
    end.dispose();
  }
}

/** How many input sets of `bytesPerSet` make a working set of at least twice the L2 cache (at least 2). */
export function rotationsFor(bytesPerSet: number, l2Bytes: number): number {
  return Math.max(2, Math.min(64, Math.ceil((2 * l2Bytes) / Math.max(1, bytesPerSet))));
}

/**
 * The device-to-device copy bandwidth (bytes read + written per second), measured now on a 1 GiB copy, as the
 * better of cudaMemcpyAsync and qk's vectorised copy kernel.
 */
export function measureCopyCeiling(bytes = 2 ** 30): {
  gbPerS: number;
  memcpyGbPerS: number;
  kernelGbPerS: number;
} {
  const src = Tensor.empty([bytes], 'u8', 'cuda');
  const dst = Tensor.empty([bytes], 'u8', 'cuda');
  try {
    const rate = (via: 'kernel' | 'memcpy') =>
      (2 * bytes) /
      (timeGpu([0], () => void dst.copyFrom(src, { via }), { callsPerSample: 4, samples: 15 }).median * 1e3);
    const memcpyGbPerS = rate('memcpy');
    const kernelGbPerS = rate('kernel');
    return { gbPerS: Math.max(memcpyGbPerS, kernelGbPerS), memcpyGbPerS, kernelGbPerS };
  } finally {
    src.dispose();
    dst.dispose();
  }
}

/** Facts about the machine that every result carries. */
export function gpuInfo(): {
  gpu: string;
  computeCapability: string;
  driverVersion: number;
  runtimeVersion: number;
  l2Bytes: number;
} {
  const d = cudaDeviceInfo();
  return {
    gpu: d.name,
    computeCapability: `${d.computeCapability.major}.${d.computeCapability.minor}`,
    driverVersion: d.driverVersion,
    runtimeVersion: d.runtimeVersion,
    l2Bytes: d.l2CacheBytes,
  };
}
