/**
 * The native addon's functions, typed. This file is the contract between `csrc/binding/*.cc` and TypeScript:
 * every export of `qk_cuda.node` is listed here with its argument order.
 *
 * Conventions: device memory is addressed by `bigint` pointers returned by `malloc` (views add byte offsets);
 * `dtype` is a {@link DTypeCode}; extents are plain numbers; every op is enqueued on the context's stream and
 * returns before the GPU finishes (copies to the host wait). The binding checks each argument (a `TypeError` or
 * `RangeError` naming it, including pointers that do not lie inside live GPU memory) and throws an `Error` with
 * `code: 'QK_CUDA'` and the op's name for CUDA failures, or `code: 'QK_OOM'` with `requested`/`free`/`total`
 * bytes when memory runs out.
 */

/** Element type codes; the same table as `csrc/common/dtype.h`. */
export const DTypeCode = { f32: 0, f16: 1, bf16: 2, i32: 3, i8: 4, u8: 5 } as const;
export type DTypeCode = (typeof DTypeCode)[keyof typeof DTypeCode];
export type FloatDTypeCode = 0 | 1 | 2;

/** Device address. */
export type DevicePtr = bigint;

/** Unary elementwise ops for {@link Binding.unary}. */
export const UnaryOp = { silu: 0, gelu: 1, geluTanh: 2, square: 3, rsqrtAddScalar: 4, copy: 5 } as const;
export type UnaryOp = (typeof UnaryOp)[keyof typeof UnaryOp];

/** Binary elementwise ops for {@link Binding.binary}. */
export const BinaryOp = { add: 0, mul: 1 } as const;
export type BinaryOp = (typeof BinaryOp)[keyof typeof BinaryOp];

/** How `b` broadcasts against `a` (`[rows, n]`) in {@link Binding.binary}. */
export const Broadcast = { none: 0, perRow: 1, perColumn: 2 } as const;
export type Broadcast = (typeof Broadcast)[keyof typeof Broadcast];

/** Fused epilogue of the linear kernels. */
export const ActivationCode = { none: 0, silu: 1, gelu: 2, geluTanh: 3 } as const;
export type ActivationCode = (typeof ActivationCode)[keyof typeof ActivationCode];

/** Gated epilogue of {@link Binding.rmsnormLinear}: none, or SwiGLU over `[gate; up]` weight rows. */
export const GluCode = { none: 0, swiglu: 1 } as const;
export type GluCode = (typeof GluCode)[keyof typeof GluCode];

/**
 * The megakernel's decoder-projection format ({@link Binding.megakernelPlan}, {@link Binding.megakernelCreate};
 * absent: bf16): `bits` 16, 8 (INT8, one f32 scale per row) or 4 (INT4, two codes per byte, low nibble first, stored
 * q + 8, one f32 scale per row and group of `groupSize` inputs, a power of two ≥ 8; with `zeroPoints`, one bf16 offset
 * per row and group too).
 */
export interface MegakernelWeightsArg {
  readonly bits: number;
  readonly groupSize?: number;
  readonly zeroPoints?: boolean;
}

/** {@link Binding.megakernelPlan}'s answer. */
export type MegakernelPlan =
  | {
      supported: true;
      /** Persistent blocks (one per SM). */
      grid: number;
      threads: number;
      /** Dynamic shared memory per block. */
      sharedBytes: number;
      /** The weight ring in shared memory: slots of `slotBytes` each. */
      slots: number;
      slotBytes: number;
      /**
       * The ring of launches that start below `shortRingUntil` (0: none): fewer, larger slots where attention is
       * short ({@link Binding.megakernelLaunch}'s `position` picks it).
       */
      shortSlots: number;
      shortSlotBytes: number;
      shortRingUntil: number;
      /**
       * Whether blocks claim GEMV tiles from shared counters (large models: balances the blocks) rather than take
       * fixed shares (small models: fewer round trips).
       */
      claimTiles: boolean;
      /**
       * Whether the warps take QKV rows four at a time (two pairs that share one read of the input), where every
       * ring's tiles hold at least four pairs of them (Qwen3-0.6B). Tuning `qkvQuads: false` turns it off.
       */
      qkvQuads: boolean;
      workspaceBytes: number;
      /** Attention chunks per KV head, at most. */
      maxChunks: number;
      /**
       * Bytes per row of the LM head's int8 screen ({@link Binding.megakernelScreen}): launches may then read about half
       * the LM head's bytes and still take the same argmax, or draw from the same top-k. 0 where the megakernel cannot screen this
       * model's LM head (claimed tiles, a hidden size that is not a multiple of 16).
       */
      screenRowBytes: number;
    }
  | { supported: false; reason: string };

/** Error codes a megakernel step leaves in `result[1]` (`MegakernelError` in csrc/megakernel/qwen3_decode.h). */
export const MegakernelErrorCode = {
  none: 0,
  timeout: 1,
  badPosition: 2,
  badToken: 3,
  nonFinite: 4,
  wrongPath: 5,
  cancelled: 6,
} as const;
export type MegakernelErrorCode = (typeof MegakernelErrorCode)[keyof typeof MegakernelErrorCode];

export interface ProbeResult {
  runtimeVersion: number;
  driverVersion: number;
  deviceCount: number;
  /** CUDA error name of the first failure, or null when a test kernel ran. */
  error: string | null;
  errorMessage?: string;
  /** Where it failed: 'driver' (no or too old driver), 'device' (no GPU), 'kernel' (no code for this GPU). */
  stage?: 'driver' | 'device' | 'kernel';
}

export interface NativeDeviceInfo {
  index: number;
  name: string;
  /** e.g. "9.0" */
  computeCapability: string;
  multiProcessors: number;
  totalMemoryBytes: number;
  freeMemoryBytes: number;
  l2CacheBytes: number;
  sharedMemoryPerBlockOptinBytes: number;
  memoryBusWidthBits: number;
  memoryClockKHz: number;
  driverVersion: number;
  runtimeVersion: number;
}

export interface MemoryStats {
  /** Bytes in live blocks handed out by the caching allocator. */
  allocatedBytes: number;
  /** Bytes held from CUDA: live plus cached. */
  reservedBytes: number;
  peakAllocatedBytes: number;
  /** cudaMalloc calls so far: constant in a steady decode loop. */
  cudaMallocCalls: number;
  cacheHits: number;
  liveBlocks: number;
}

/**
 * Limits of the megakernel that the C++ owns (csrc/megakernel/qwen3_decode.h), exported by the addon as
 * {@link Binding.megakernelLimits} so that TypeScript copies of them can be checked when the addon loads.
 */
export interface MegakernelLimits {
  /** The one head size the megakernel serves (`kMegakernelHeadDim`). */
  readonly headDim: number;
  /** Decode steps one {@link Binding.megakernelLaunch} may run (`kMegakernelMaxSteps`). */
  readonly maxSteps: number;
  /** The largest top-k a launch samples with (`kMegakernelMaxTopK`). */
  readonly maxTopK: number;
  /** Trace stamps per layer and step (`kMegakernelTraceEventsPerLayer`). */
  readonly traceEventsPerLayer: number;
}

/**
 * The megakernel's tuning knobs as {@link Binding.megakernelPlan} and {@link Binding.megakernelCreate} read them
 * (csrc/binding/megakernel_tuning.h): every field optional, an absent one keeping its default. `MegakernelTuning` of
 * `@qk/ops` documents each (what it does, its default and why); the addon checks each again and names the field in a
 * TypeError (`tuning.inflight`). Ranges: {@link Binding.megakernelTuningFields}.
 */
export interface MegakernelTuningArgs {
  /** KB per weight-ring slot (0: the plan's). */
  readonly slotKb?: number;
  /** Weight copies in flight per block (0: unbounded). */
  readonly inflight?: number;
  /** The LM head's weight copies in flight per block (0: unbounded). */
  readonly lmInflight?: number;
  /** Claimed GEMV tiles instead of fixed shares. */
  readonly claimTiles?: boolean;
  /** Attention items up to which attending blocks take no QKV or O rows. */
  readonly skipItems?: number;
  /** Weight copies marked L2 evict-first. */
  readonly l2Stream?: boolean;
  /** A short second attention pass staged in shared memory. */
  readonly kvStage?: boolean;
  /** Keys per attention chunk to aim for (0: one pass). */
  readonly chunkKeys?: number;
  /** QKV rows dealt two pairs at a time where the plan allows. */
  readonly qkvQuads?: boolean;
  /** Cached attention rows prefetched to L2 at each layer's start. */
  readonly kvPrefetch?: boolean;
  /** Heads of up to this many chunks merged by the O blocks (0: by chunk 0's block). */
  readonly oMerge?: number;
  /** Launches whose steps are all staged run the kernel without the attention by chunks. */
  readonly pathKernels?: boolean;
  /** Keys from which steps take the staged attention. */
  readonly stagedFrom?: number;
  /** Keys up to which steps take the staged attention (0: never). */
  readonly stagedUntil?: number;
  /** The staged attention's blocks take gate/up rows too. */
  readonly stagedGateUp?: boolean;
  /** The staged attention's roundings: 0 fp32, 1 HF's, 2 HF's with `__fdiv_rn`. */
  readonly stagedHf?: number;
  /** The staged rows always take the whole ring's place. */
  readonly stagedRing?: boolean;
  /** Diagnostic bits (`MegakernelArgs::debug`). */
  readonly debug?: number;
  /** Milliseconds every wait inside the kernel may take. */
  readonly timeoutMs?: number;
}

/** How the addon checks one field of {@link MegakernelTuningArgs}. */
export type MegakernelTuningField =
  | { readonly kind: 'integer'; readonly min: number; readonly max: number }
  | { readonly kind: 'boolean' }
  | { readonly kind: 'bits'; readonly mask: number };

export interface Binding {
  readonly abiVersion: number;
  readonly megakernelLimits: MegakernelLimits;
  /**
   * Every field of {@link MegakernelTuningArgs} with the kind and range the addon checks it against (frozen), so that
   * TypeScript copies of the table can be checked when the addon loads.
   */
  readonly megakernelTuningFields: Readonly<Record<keyof MegakernelTuningArgs, MegakernelTuningField>>;

  // Runtime
  probe(): ProbeResult;
  deviceInfo(): NativeDeviceInfo;
  malloc(bytes: number): DevicePtr;
  free(ptr: DevicePtr): void;
  copyToDevice(dst: DevicePtr, src: ArrayBufferView): void;
  copyToHost(dst: ArrayBufferView, src: DevicePtr): void;
  copyDeviceToDevice(dst: DevicePtr, src: DevicePtr, bytes: number): void;
  /** Device copy by qk's own vectorised kernel (the bandwidth ceiling benchmarks compare against). */
  copyKernel(dst: DevicePtr, src: DevicePtr, bytes: number): void;
  memset(dst: DevicePtr, value: number, bytes: number): void;
  memoryStats(): MemoryStats;
  emptyCache(): void;
  synchronize(): void;
  eventCreate(): number;
  eventRecord(event: number): void;
  eventElapsedMs(start: number, end: number): number;
  eventDestroy(event: number): void;
  /** Starts capturing the stream's work into a CUDA graph (relaxed mode). */
  captureBegin(): void;
  /** Ends the capture and returns a graph handle to replay. */
  captureEnd(): number;
  graphLaunch(graph: number): void;
  graphDestroy(graph: number): void;

  // Norms (csrc/kernels/rmsnorm.cu)
  rmsnorm(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    weight: DevicePtr,
    rows: number,
    n: number,
    eps: number,
  ): void;
  fusedAddRmsnorm(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    residualOut: DevicePtr,
    x: DevicePtr,
    residual: DevicePtr,
    weight: DevicePtr,
    rows: number,
    n: number,
    eps: number,
  ): void;

  // Elementwise, RoPE, SwiGLU, embedding (csrc/kernels/elementwise.cu, rope.cu, swiglu.cu, embedding.cu)
  /** out[i] = op(x[i], alpha), reading `dtypeIn` and writing `dtypeOut` (the eager baseline casts with `copy`). */
  unary(
    dtypeIn: FloatDTypeCode,
    dtypeOut: FloatDTypeCode,
    op: UnaryOp,
    out: DevicePtr,
    x: DevicePtr,
    count: number,
    alpha: number,
  ): void;
  /** out = a (op) b over `[rows, n]`, with b broadcast per `broadcast`; each operand has its own dtype. */
  binary(
    dtypeOut: FloatDTypeCode,
    op: BinaryOp,
    out: DevicePtr,
    dtypeA: FloatDTypeCode,
    a: DevicePtr,
    dtypeB: FloatDTypeCode,
    b: DevicePtr,
    rows: number,
    n: number,
    broadcast: Broadcast,
  ): void;
  /** out[r] = mean(x[r, :]) in f32 (eager-style reduction). */
  rowMean(dtypeIn: FloatDTypeCode, out: DevicePtr, x: DevicePtr, rows: number, n: number): void;
  /**
   * Counts the NaN/±Inf elements of `x` (`count` elements) and finds the first: `out` is i32 `[4]`, 8-byte aligned,
   * read as two little-endian u64 (count, index of the first; all ones when there is none). Resets `out` itself.
   */
  findNonFinite(dtype: FloatDTypeCode, out: DevicePtr, x: DevicePtr, count: number): void;
  /** RoPE (rotate-half) on x `[tokens, heads, headDim]`; `invFreq` is f32 `[headDim/2]`, positions i32 `[tokens]`. */
  rope(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    positions: DevicePtr,
    invFreq: DevicePtr,
    tokens: number,
    heads: number,
    headDim: number,
  ): void;
  /** Per-head RMSNorm (weight `[headDim]`) fused with RoPE. */
  qkNormRope(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    weight: DevicePtr,
    positions: DevicePtr,
    invFreq: DevicePtr,
    tokens: number,
    heads: number,
    headDim: number,
    eps: number,
  ): void;
  /**
   * Qwen3's attention prologue after the fused q|k|v projection, for `qkv` `[tokens, qHeads + 2·kvHeads, headDim]`
   * (q heads, then k heads, then v heads): q heads get per-head RMSNorm with `qWeight` and RoPE into `qOut`
   * `[tokens, qHeads, headDim]`; k heads the same with `kWeight`, written to row `positions[t]` of `kCache`
   * `[cacheRows, kvHeads, headDim]`; v heads are copied bit-exactly to row `positions[t]` of `vCache` (same shape).
   * `positions` (i32 `[tokens]`) is read on the device and is also the RoPE position; a position outside
   * `[0, cacheRows)` writes no cache row (its q head is still produced). `invFreq` is f32 `[headDim/2]` as for
   * {@link Binding.qkNormRope}; headDim is even and at most 256.
   */
  qkNormRopeAppend(
    dtype: FloatDTypeCode,
    qOut: DevicePtr,
    kCache: DevicePtr,
    vCache: DevicePtr,
    qkv: DevicePtr,
    qWeight: DevicePtr,
    kWeight: DevicePtr,
    positions: DevicePtr,
    invFreq: DevicePtr,
    tokens: number,
    qHeads: number,
    kvHeads: number,
    headDim: number,
    cacheRows: number,
    eps: number,
  ): void;
  /**
   * out[r, i] = silu(gate[r, i]) · up[r, i] for i < ffn, rows `r` of stride `inStride` elements in `gate`/`up`
   * (separate layout: inStride = ffn; fused gate-up layout: up = gate + ffn elements, inStride = 2·ffn).
   */
  swiglu(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    gate: DevicePtr,
    up: DevicePtr,
    rows: number,
    ffn: number,
    inStride: number,
  ): void;
  /** out[i, :] = table[ids[i], :]; ids must lie in [0, vocab) (checked by the caller). */
  embedding(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    ids: DevicePtr,
    table: DevicePtr,
    count: number,
    vocab: number,
    hidden: number,
  ): void;

  /** dst[index[i], :] = src[i, :] for i < count (KV-cache append at device-side positions); out-of-range skipped. */
  scatterRows(
    dtype: FloatDTypeCode,
    dst: DevicePtr,
    index: DevicePtr,
    src: DevicePtr,
    count: number,
    dstRows: number,
    rowElems: number,
  ): void;

  // Linear (csrc/kernels/gemv.cu, gemm.cu, quant.cu)
  /** out[M, N] = act(x[M, K] · W[N, K]ᵀ + bias); GEMV kernels for small M, tensor-core GEMM above. bias may be 0n. */
  linear(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    weight: DevicePtr,
    bias: DevicePtr,
    m: number,
    k: number,
    n: number,
    activation: ActivationCode,
  ): void;
  /**
   * `out[M, N] = silu(x · gateᵀ) · (x · upᵀ)` with `gateUp` `[2N, K]` (gate rows, then up rows), gate and up kept in
   * f32 and rounded once, in one tensor-core GEMM whose epilogue pairs them (compute capability 9.0, M above the
   * small-M kernels' 32 rows, K a multiple of 8, 16-byte aligned x and gateUp). Returns whether it ran: `false`
   * means the fused kernel does not apply here and nothing was written (run `linear` over the 2N rows, then
   * `swigluFused`).
   */
  linearSwiglu(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    gateUp: DevicePtr,
    m: number,
    k: number,
    n: number,
  ): boolean;
  /**
   * Decode-sized (M ≤ 64) fused norm + projection over rows of `x` `[M, K]`:
   *
   * `h = x + residual` (rounded to the dtype; `x` alone when `residual` is 0n), written to `residualOut` unless it
   * is 0n; `h ← rmsnorm(h, normWeight, eps)` (rounded to the dtype; skipped when `normWeight` is 0n); then with
   * `glu` 0 `out[M, N] = h · Wᵀ` (`W` `[N, K]`), with `glu` 1 (SwiGLU) `W` is `[2N, K]`, gate rows then up rows,
   * and `out[r, j] = silu(g) · u` with `g = h[r]·W[j]`, `u = h[r]·W[N + j]` both kept in f32, rounded once.
   * `n` counts output features. `residualOut` must not overlap `x` or `residual` (every block reads all rows).
   */
  rmsnormLinear(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    normWeight: DevicePtr,
    weight: DevicePtr,
    m: number,
    k: number,
    n: number,
    eps: number,
    residual: DevicePtr,
    residualOut: DevicePtr,
    glu: GluCode,
  ): void;
  quantizeInt8(
    dtype: FloatDTypeCode,
    qweight: DevicePtr,
    scales: DevicePtr,
    weight: DevicePtr,
    n: number,
    k: number,
  ): void;
  quantizeInt4(
    dtype: FloatDTypeCode,
    qweight: DevicePtr,
    scales: DevicePtr,
    weight: DevicePtr,
    n: number,
    k: number,
    groupSize: number,
  ): void;
  linearInt8(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    qweight: DevicePtr,
    scales: DevicePtr,
    bias: DevicePtr,
    m: number,
    k: number,
    n: number,
  ): void;
  linearInt4(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    x: DevicePtr,
    qweight: DevicePtr,
    scales: DevicePtr,
    bias: DevicePtr,
    m: number,
    k: number,
    n: number,
    groupSize: number,
  ): void;

  // Attention (csrc/kernels/attention_decode.cu, attention_prefill.cu)
  /** Bytes of scratch {@link Binding.attentionDecode} needs for these sizes. */
  attentionDecodeWorkspaceBytes(qHeads: number, headDim: number, kvLen: number): number;
  /**
   * One query token `[qHeads, headDim]` against `kvLen` cached keys/values `[kvLen, kvHeads, headDim]` (split-KV).
   * With `kvLenDevice` (an i32 in device memory) the key count is read at run time and `kvLen` is the capacity
   * the workspace is sized for: one captured CUDA graph then serves every step of a decode.
   */
  attentionDecode(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    q: DevicePtr,
    k: DevicePtr,
    v: DevicePtr,
    kvLen: number,
    qHeads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
    workspace: DevicePtr,
    workspaceBytes: number,
    kvLenDevice?: DevicePtr,
  ): void;
  /** Causal (or full) flash-style attention of `qLen` queries starting at `positionOffset` over `kvLen` keys. */
  attentionPrefill(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    q: DevicePtr,
    k: DevicePtr,
    v: DevicePtr,
    qLen: number,
    kvLen: number,
    qHeads: number,
    kvHeads: number,
    headDim: number,
    positionOffset: number,
    causal: boolean,
    scale: number,
  ): void;

  // Sampling (csrc/kernels/sampling.cu)
  argmax(dtype: FloatDTypeCode, out: DevicePtr, x: DevicePtr, rows: number, n: number): void;
  /** Bytes of scratch {@link Binding.sample} needs. */
  sampleWorkspaceBytes(rows: number, vocab: number): number;
  /**
   * Draws one id per row following `@qk/ops`' `sample` (temperature, top-k, top-p), with the row's uniform
   * `uniforms[r]` (f64, from the host's seeded PCG32 stream).
   */
  sample(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    logits: DevicePtr,
    rows: number,
    vocab: number,
    temperature: number,
    topK: number,
    topP: number,
    uniforms: DevicePtr,
    workspace: DevicePtr,
    workspaceBytes: number,
  ): void;
  /**
   * The sampling controls of `@qk/ops`' `applyLogitControls` (csrc/kernels/logit_controls.cu): logits
   * `[rows, vocab]` → f32 `out`. `counts` (i32 `[rows, vocab]`), `promptTokens` and `mask` (i32 bitsets,
   * `[rows, ⌈vocab/32⌉]`) and `bias` (f32 `[rows, vocab]`) may be `0n` (absent). `logMinP` is ln(min-p), or
   * `-Infinity` when min-p is off; `scratch` (4 bytes per row) is needed only when it is on, with `temperature` > 0.
   */
  applyLogitControls(
    dtype: FloatDTypeCode,
    out: DevicePtr,
    logits: DevicePtr,
    rows: number,
    vocab: number,
    counts: DevicePtr,
    promptTokens: DevicePtr,
    bias: DevicePtr,
    mask: DevicePtr,
    repetitionPenalty: number,
    presencePenalty: number,
    frequencyPenalty: number,
    logMinP: number,
    temperature: number,
    scratch: DevicePtr,
  ): void;
  /** `counts[r, ids[r]] += 1` (i32 `[rows, vocab]`, i32 `[rows]`) for ids inside the vocabulary, on the device. */
  addTokenCounts(counts: DevicePtr, ids: DevicePtr, rows: number, vocab: number): void;
  /**
   * Log-probabilities of `ids` (i32 `[rows]`) under softmax of `logits` `[rows, vocab]` → f32 `logprobs` `[rows]`,
   * and the `topN` (0–20) most likely tokens → i32 `topIds` and f32 `topLogprobs` `[rows, topN]` (both `0n` when
   * `topN` is 0). A row it cannot report (NaN, +∞, all −∞, id outside the vocabulary) gets NaN and ids −1.
   * `scratch`: u8 of {@link Binding.tokenLogprobsScratchBytes}; `rows` at most 65,535.
   */
  tokenLogprobs(
    dtype: FloatDTypeCode,
    logprobs: DevicePtr,
    topIds: DevicePtr,
    topLogprobs: DevicePtr,
    logits: DevicePtr,
    ids: DevicePtr,
    rows: number,
    vocab: number,
    topN: number,
    scratch: DevicePtr,
  ): void;
  /** Bytes of {@link Binding.tokenLogprobs}' scratch for `rows` rows of `vocab` logits. */
  tokenLogprobsScratchBytes(rows: number, vocab: number): number;

  // Qwen3 decode megakernel (csrc/megakernel/qwen3_decode.cu)
  /**
   * How the megakernel would launch for these sizes on this device (one persistent block per SM), or why it
   * cannot: sizes that are not a dense Qwen3 shape it serves (head size 128, at most 4 query heads per KV head,
   * at most 40 layers), or a GPU on which one block per SM cannot be resident. Of `tuning` (checked whole, before any
   * CUDA call), only `slotKb` changes the plan.
   */
  megakernelPlan(
    hidden: number,
    qHeads: number,
    kvHeads: number,
    ffn: number,
    layers: number,
    vocab: number,
    tuning?: MegakernelTuningArgs,
    weights?: MegakernelWeightsArg,
  ): MegakernelPlan;
  /**
   * Creates a megakernel instance over bf16 weights (the projections in `weights`' format) and caches (every address
   * checked here, once) and zeroes `workspace` (at least `plan.workspaceBytes`, 256-byte aligned). `layerPointers`
   * holds 18 addresses per layer: inputNorm, qkv (`[q; k; v]` rows), qNorm, kNorm, o, postNorm, gateUp (`[gate; up]`
   * rows), down, kCache, vCache (`[maxContext, kvHeads, 128]`), then the scales of qkv, o, gateUp and down (INT8 and
   * INT4; else `0n`) and their offsets (INT4 with zero points; else `0n`). `state` (i32 `[token, position]`) is read by each launch, which leaves
   * `[last token, position + steps]` in it; `result` (i32 `[token, error]`) receives the last argmax over ids below
   * `vocabLimit` and a {@link MegakernelErrorCode}; `logits` (bf16 `[vocab]`) the last step's logits (launches
   * that screen the LM head write none). With `trace` (u64 `[grid][layers·17 + 3]`; `0n`: none), each step writes
   * globaltimer stamps at its stage boundaries there (a diagnostic: see csrc/megakernel/DESIGN.md, "The overhead
   * budget"). `tuning` (checked before any CUDA call) holds the knobs, read once here; every wait inside the kernel
   * gives up after its `timeoutMs`. Returns a handle; the tensors must outlive it.
   */
  megakernelCreate(
    dtype: FloatDTypeCode,
    hidden: number,
    qHeads: number,
    kvHeads: number,
    ffn: number,
    layers: number,
    vocab: number,
    vocabLimit: number,
    maxContext: number,
    eps: number,
    layerPointers: BigUint64Array,
    embed: DevicePtr,
    finalNorm: DevicePtr,
    lmHead: DevicePtr,
    invFreq: DevicePtr,
    state: DevicePtr,
    result: DevicePtr,
    logits: DevicePtr,
    workspace: DevicePtr,
    trace: DevicePtr,
    tuning?: MegakernelTuningArgs,
    weights?: MegakernelWeightsArg,
  ): number;
  /**
   * Builds the LM head's int8 screen into `screen` (u8, `vocab · plan.screenRowBytes` bytes, 16-byte aligned; queued
   * on the op stream) and lets the instance's launches use it: such a launch streams the screen instead of the bf16
   * LM head, bounds every logit from it, and recomputes in bf16, with the unscreened arithmetic, only the rows whose
   * bound reaches the best one (greedy) or the top-k-th best (sampled), so it takes the same argmax, or draws from
   * the same top-k logits; it writes no logits. Returns false, with
   * nothing built, for an instance that claims its tiles (tuning `claimTiles: true`): the screen needs fixed shares. `0n`
   * detaches the screen. The tensor must outlive the instance (or the detach).
   */
  megakernelScreen(handle: number, screen: DevicePtr): boolean;
  /**
   * Queues one launch of `steps` (1–64, default 1) decode steps on the op stream: step s feeds its token to step
   * s + 1 on the device, and the launch leaves `[last token, position + steps]` in `state`. Each step's token is
   * published to pinned host memory as soon as it is known ({@link Binding.megakernelToken}). The token is the
   * argmax, or with `topK` in 1–64 a draw by `sample`'s rule (`temperature` > 0, `topP` in (0, 1]) with
   * `uniforms[s]` (one value in [0, 1) per step); with `topK` 0 the sampling arguments are not read. `steps` must
   * be 1 for an instance that records a trace. `position`, the launch's first position (the one in `state`), picks
   * the weight ring: the plan's short-context ring below its `shortRingUntil`, else (and when absent) the default.
   * `screen` (default true): a launch of an instance with a screen ({@link Binding.megakernelScreen}) uses it and
   * leaves `logits` unwritten; false computes and writes every logit. `masked` (default false): each step's token is
   * taken over the ids its mask allows, which the host publishes while the step runs
   * ({@link Binding.megakernelMask}); the step's LM head waits for it (within the instance's timeout). `controls`
   * (`[repetition, presence, frequency, ln min-p]`, absent: none) applies the sampling controls in the kernel as
   * `applyLogitControls` applies them before `sample`: penalties other than `[1, 0, 0]` read the counts and the ids
   * seen that {@link Binding.megakernelHistory} uploaded, and each step adds its token to them; min-p (−Infinity: off)
   * applies to sampled launches.
   */
  megakernelLaunch(
    handle: number,
    steps?: number,
    topK?: number,
    temperature?: number,
    topP?: number,
    uniforms?: Float64Array,
    position?: number,
    screen?: boolean,
    masked?: boolean,
    controls?: Float64Array,
  ): void;
  /**
   * Uploads the state penalised launches start from (queued on the op stream, after the launches before it):
   * `counts` (vocab counts of the generated ids, each ≥ 0) and `seen` (ceil(vocab / 32) words; bit `t & 31` of word
   * `t >>> 5` set for an id of the prompt or a generated one). The arrays may be reused once it returns.
   */
  megakernelHistory(handle: number, counts: Int32Array, seen: Uint32Array): void;
  /**
   * Publishes the mask of step `index` of the last launch, a masked one: `words` (ceil(vocab / 32) words; bit
   * `t & 31` of word `t >>> 5` allows id `t`) are copied to the device on a stream of their own while the kernel
   * runs, then the step's tag, which its LM head waits for. Once per step, in
   * order: step `index` only after step `index − 1`'s token has been published ({@link Binding.megakernelToken}),
   * and a launch's first step only after every step of the launches before it has. Returns false, publishing
   * nothing, when another binding call cancelled the launch first: a kernel waiting for a mask holds the op stream,
   * so every call but this one, `megakernelToken` and `megakernelCancel` cancels it (the instance is then cleared, as
   * {@link Binding.megakernelCancel} clears it).
   */
  megakernelMask(handle: number, index: number, words: Uint32Array): boolean;
  /**
   * Ends a masked last launch that still waits for masks (its waiting step fails with `cancelled` at its LM head),
   * waits for the stream and clears the instance as {@link Binding.megakernelReset} does. Nothing otherwise.
   */
  megakernelCancel(handle: number): void;
  /**
   * The token of step `index` of the last launch: spins on the host word the kernel publishes it in, while the kernel
   * goes on. Returns `-code` ({@link MegakernelErrorCode}) when the launch failed. Throws when the launch ended
   * without the token, or when nothing arrives within the instance's timeout after the kernel could begin.
   */
  megakernelToken(handle: number, index: number): number;
  /**
   * After a launch reported an error: waits for the stream, clears the instance's workspace (flagged words,
   * counters) and host words, and restarts its epochs.
   */
  megakernelReset(handle: number): void;
  megakernelDestroy(handle: number): void;
  /**
   * Launches since the addon loaded, by the attention path of the kernel that ran: `[both, staged]`. A launch whose
   * steps all take the staged attention runs a kernel compiled without the attention by chunks, unless
   * its instance was made with tuning `pathKernels: false`. A diagnostic.
   */
  megakernelLaunchPaths(): [number, number];
}
