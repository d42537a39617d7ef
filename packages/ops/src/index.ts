/**
 * `@qk/ops`: typed tensors and the ops of a Qwen3 forward pass, each with a plain-TypeScript reference that
 * defines what correct means. Works on any machine; no GPU or native addon needed.
 */
export {
  ALL_DTYPES,
  DTYPES,
  type DType,
  type DTypeInfo,
  FLOAT_DTYPES,
  type FloatDType,
  type IntDType,
  type StorageOf,
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  isDType,
  isFloatDType,
  roundToDType,
} from './dtype.js';
export {
  type ArgumentMismatch,
  QkAssertionError,
  QkDeviceError,
  QkDisposedError,
  QkDtypeError,
  QkError,
  type QkErrorCode,
  QkIndexError,
  QkShapeError,
  QkValueError,
} from './errors.js';
export { Rng } from './random.js';
export { type Shape, formatShape, shapeSize } from './shape.js';
export { type Device, type FloatTensor, type NestedArray, type RandomOptions, Tensor } from './tensor.js';

export { type Activation, type GeluApproximation, add, erf, gelu, mul, silu } from './ops/activations.js';
export { type AttentionOptions, attention } from './ops/attention.js';
export { type TokenIds, embedding } from './ops/embedding.js';
export { type LinearOptions, linear } from './ops/linear.js';
export {
  DEFAULT_INT4_GROUP,
  type Int4Weight,
  type Int8Weight,
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
  type RmsnormOptions,
  fusedAddRmsnorm,
  qkNorm,
  rmsnorm,
} from './ops/rmsnorm.js';
export { DEFAULT_ROPE_THETA, type RopeOptions, rope, ropeInvFreq } from './ops/rope.js';
export { type SampleOptions, argmax, sample } from './ops/sampling.js';
export { softmax } from './ops/softmax.js';
export { swiglu, swigluFused } from './ops/swiglu.js';
