/** Weight-only quantization of Qwen3 decoder projections, and measuring what it costs in quality. */
export {
  type ExternalQuantizationConfig,
  loadQuantizedCheckpoint,
  type QkQuantizationConfig,
  type QuantizeCheckpointOptions,
  quantizeCheckpoint,
  readQuantizationConfig,
  type StoredQuantization,
} from './checkpoint.js';
export { type ExternalMethod, type PackedInt4, type RepackedInt4, repackInt4 } from './external.js';
export { compareLogits, type LinearError, type LogitAgreement, linearErrors } from './quality.js';
export {
  anyLinear,
  checkWeightFormat,
  DEFAULT_GROUP_SIZE,
  disposeQuantizedLayers,
  LINEAR_KEYS,
  type LinearKey,
  linearName,
  QkQuantizationError,
  type QuantizedLayer,
  type QuantizedLinear,
  type QuantizeOptions,
  quantizeLinear,
  quantizeLinears,
  quantLinear,
  type WeightFormat,
} from './quantize.js';
