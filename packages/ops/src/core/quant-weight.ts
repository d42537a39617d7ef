/**
 * The quantized weight formats: what `quantizeInt8`/`quantizeInt4` (src/ops/quant.ts) produce, and what their CPU
 * references and the CUDA kernels (src/cuda/linear.ts) read.
 */
import type { Tensor } from '../tensor.js';

/** Weight-only INT8: `w[o, k] ≈ qweight[o, k] · scales[o]`, symmetric per output channel. */
export interface Int8Weight {
  /** `[out, in]`, values in [−127, 127]. */
  qweight: Tensor<'i8'>;
  /** `[out]`, `max|w[o, :]| / 127` (0 for an all-zero row). */
  scales: Tensor<'f32'>;
}

/**
 * Weight-only INT4, symmetric per group of `groupSize` consecutive inputs of a row:
 * `w[o, k] ≈ q[o, k] · scales[o, ⌊k / groupSize⌋]` with `q` in [−7, 7].
 *
 * Packing: `qweight` is `u8` `[out, in/2]`; byte `j` of a row holds element `2j` in its low nibble and `2j+1` in
 * its high nibble, each stored offset by 8 (nibble = q + 8), so a kernel dequantises with `(nibble − 8) · scale`.
 */
export interface Int4Weight {
  qweight: Tensor<'u8'>;
  /** `[out, in / groupSize]`, `max|w[group]| / 7` (0 for an all-zero group). */
  scales: Tensor<'f32'>;
  groupSize: number;
}
