/**
 * `@qk/ops`: typed tensors and the ops of a Qwen3 forward pass, each with a plain-TypeScript reference that
 * defines what correct means. Works on any machine; no GPU or native addon needed.
 */

export { cudaAvailable, cudaStatus, useCudaBackend } from './backend/cuda.js';
export {
  type CudaDeviceInfo,
  CudaEvent,
  CudaGraph,
  type CudaMemoryStats,
  cudaDeviceInfo,
  cudaEmptyCache,
  cudaMemoryStats,
  cudaSynchronize,
} from './backend/runtime.js';
export type { Activation } from './core/activation.js';
export type { Int4Weight, Int8Weight } from './core/quant-weight.js';
export { ropeInvFreq } from './core/rope-freq.js';
export {
  ALL_DTYPES,
  bf16BitsToF32,
  DTYPES,
  type DType,
  type DTypeInfo,
  FLOAT_DTYPES,
  type FloatDType,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  type IntDType,
  isDType,
  isFloatDType,
  roundToDType,
  type StorageOf,
} from './dtype.js';
export {
  type ArgumentMismatch,
  QkAssertionError,
  QkCudaError,
  QkDeviceError,
  QkDisposedError,
  QkDtypeError,
  QkError,
  type QkErrorCode,
  QkIndexError,
  QkOutOfMemoryError,
  QkShapeError,
  QkValueError,
} from './errors.js';
export type { ElementwiseOptions } from './ops/activations.js';
export { add, erf, type GeluApproximation, gelu, mul, silu } from './ops/activations.js';
export { type AttentionOptions, attention, attentionWorkspace } from './ops/attention.js';
export { rmsnormEager, swigluEager } from './ops/eager.js';
export type { EmbeddingOptions } from './ops/embedding.js';
export { embedding, scatterRows, type TokenIds } from './ops/embedding.js';
export { findNonFinite, type NonFiniteStats, nonFiniteStats } from './ops/finite.js';
export {
  type LinearOptions,
  type LinearSwigluOptions,
  linear,
  linearSwiglu,
  type RmsnormLinearOptions,
  rmsnormLinear,
} from './ops/linear.js';
export {
  addTokenCounts,
  applyLogitControls,
  bitsetWords,
  type LogitControls,
  MAX_TOP_LOGPROBS,
  type TokenLogprobs,
  type TokenLogprobsOptions,
  tokenLogprobs,
} from './ops/logit-controls.js';
export {
  DEFAULT_INT4_GROUP,
  dequantizeInt4,
  dequantizeInt8,
  linearInt4,
  linearInt8,
  packInt4,
  quantizeInt4,
  quantizeInt8,
  unpackInt4,
} from './ops/quant.js';
export {
  DEFAULT_RMS_EPS,
  type FusedAddRmsnormResult,
  fusedAddRmsnorm,
  qkNorm,
  type RmsnormOptions,
  rmsnorm,
} from './ops/rmsnorm.js';
export {
  DEFAULT_ROPE_THETA,
  type QkNormRopeAppendOptions,
  type QkNormRopeOptions,
  qkNormRope,
  qkNormRopeAppend,
  type RopeOptions,
  rope,
} from './ops/rope.js';
export { argmax, type SampleOptions, sample } from './ops/sampling.js';
export { softmax } from './ops/softmax.js';
export { swiglu, swigluFused } from './ops/swiglu.js';
export { Rng } from './random.js';
export { formatShape, type Shape, shapeSize } from './shape.js';
export { type Device, type FloatTensor, type NestedArray, type RandomOptions, Tensor } from './tensor.js';
