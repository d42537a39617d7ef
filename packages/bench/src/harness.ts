/**
 * GPU timing. A sample is the GPU time of a CUDA graph that replays `callsPerSample` calls of the op, divided
 * by that count: graphs remove the JS-to-native launch gaps, so the number is the kernels' own time. Each call
 * takes the next of several input sets whose total size exceeds twice the L2 cache, so no call finds its inputs
 * already cached. The PyTorch peers are timed the same way (torch.cuda.graph), so ratios compare like with like.
 */
import { CudaEvent, CudaGraph, cudaSynchronize, Tensor } from '@qk/ops';
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

export interface CpuTimingOptions {
  /** Untimed calls first (default: one per input set). */
  warmup?: number;
  /** At least this many timed calls (default 5). */
  minSamples?: number;
  /** At most this many timed calls (default 200). */
  maxSamples?: number;
  /** Keep sampling until this much wall time has passed, within the sample bounds (default 300 ms). */
  budgetMs?: number;
}

/**
 * Times `call(set)` on the host with the monotonic clock (`performance.now`), cycling over `inputSets`; returns
 * per-call microseconds. For the CPU reference ops and anything else that runs synchronously in JS.
 */
export function timeCpu<S>(
  inputSets: readonly S[],
  call: (set: S) => void,
  options: CpuTimingOptions = {},
): Summary {
  if (inputSets.length === 0) throw new Error('timeCpu: no input sets');
  const warmup = options.warmup ?? inputSets.length;
  for (let i = 0; i < warmup; i++) call(inputSets[i % inputSets.length]!);
  const minSamples = options.minSamples ?? 5;
  const maxSamples = Math.max(minSamples, options.maxSamples ?? 200);
  const deadline = performance.now() + (options.budgetMs ?? 300);
  const perCall: number[] = [];
  for (
    let i = 0;
    perCall.length < minSamples || (perCall.length < maxSamples && performance.now() < deadline);
    i++
  ) {
    const set = inputSets[i % inputSets.length]!;
    const t0 = performance.now();
    call(set);
    // A clock tick can be coarser than a tiny call; never record a zero.
    perCall.push(Math.max(1e-3, (performance.now() - t0) * 1000));
  }
  return summarize(perCall);
}

/**
 * The host memory copy bandwidth (bytes read + written per second, GB/s), measured now on a `bytes` copy between
 * two buffers: the ceiling that CPU runs report their bandwidth against.
 */
export function measureHostCopyCeiling(bytes = 64 * 2 ** 20): { gbPerS: number } {
  const src = Buffer.alloc(bytes, 1);
  const dst = Buffer.alloc(bytes);
  const t = timeCpu([0], () => void src.copy(dst), {
    warmup: 2,
    minSamples: 5,
    maxSamples: 20,
    budgetMs: 200,
  });
  return { gbPerS: (2 * bytes) / (t.median * 1e3) };
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
