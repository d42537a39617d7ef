/**
 * Published 4-bit layouts (AWQ "gemm" and GPTQ), repacked into the `@qk/ops` INT4 layout without loss.
 *
 * Both store `w[k, o] = (q − z) · s` with 4-bit codes `q`, 4-bit zero points `z` and scales `s` per group of
 * `group_size` inputs. Our `Int4Weight` stores `nibble − 8` (any value in −8…7) times a group scale, so we keep
 * `q' = q − 8` and `s` as they are and carry the rest as one offset per row and group, `(8 − z) · s`:
 * `w = q'·s + (8 − z)·s` exactly. The linear is `linearInt4` plus `Σ_g offset[o, g] · Σ_{k∈g} x[k]`.
 *
 * - AWQ (AutoAWQ GEMM): `qweight` I32 `[in, out/8]`, eight outputs per int32 in the order 0,2,4,6,1,3,5,7 (nibble
 *   `i` holds output `8c + [0,2,4,6,1,3,5,7][i]`); `qzeros` I32 `[in/g, out/8]`, same packing; `scales` F16
 *   `[in/g, out]`.
 * - GPTQ (AutoGPTQ, checkpoint format v1): `qweight` I32 `[in/8, out]`, eight inputs per int32, low nibble first;
 *   `qzeros` I32 `[in/g, out/8]`, outputs low nibble first, stored as `z − 1`; `scales` F16 `[in/g, out]`;
 *   `g_idx` I32 `[in]`. Only the sequential order (`g_idx[k] = ⌊k/g⌋`, `desc_act: false`) is supported.
 */
import { packInt4, Tensor } from '@qk/ops';
import { QkCheckpointError } from '../errors.js';

export type ExternalMethod = 'awq' | 'gptq';

const AWQ_REVERSE = [0, 4, 1, 5, 2, 6, 3, 7];

/** A 4-bit projection in our layout plus per-group offsets (`[out, in/g]`, f32). */
export interface RepackedInt4 {
  readonly qweight: Tensor<'u8'>;
  readonly scales: Tensor<'f32'>;
  readonly offsets: Tensor<'f32'>;
  readonly groupSize: number;
}

/** The packed tensors of one projection, as read from the file (scales already in float32). */
export interface PackedInt4 {
  readonly qweight: Int32Array;
  readonly qzeros: Int32Array;
  readonly scales: Float32Array;
  readonly gIdx?: Int32Array;
}

/**
 * Repacks one AWQ or GPTQ projection of `[out, in]` with group size `g`.
 *
 * @throws QkCheckpointError for sizes that do not fit the layout, or a GPTQ `g_idx` that is not sequential.
 */
export function repackInt4(
  method: ExternalMethod,
  packed: PackedInt4,
  outFeatures: number,
  inFeatures: number,
  g: number,
  name: string,
  gptqZeroOffset = 1,
): RepackedInt4 {
  const groups = inFeatures / g;
  const fail = (why: string) => new QkCheckpointError(`${name}: ${why}`);
  if (!Number.isInteger(groups) || g % 2 !== 0 || outFeatures % 8 !== 0 || inFeatures % 8 !== 0)
    throw fail(
      `a [${outFeatures}, ${inFeatures}] projection with group size ${g} does not fit the ${method} layout.`,
    );
  const o8 = outFeatures / 8;
  const want = method === 'awq' ? inFeatures * o8 : (inFeatures / 8) * outFeatures;
  if (packed.qweight.length !== want)
    throw fail(`qweight has ${packed.qweight.length} values, expected ${want}.`);
  if (packed.qzeros.length !== groups * o8)
    throw fail(`qzeros has ${packed.qzeros.length} values, expected ${groups * o8}.`);
  if (packed.scales.length !== groups * outFeatures)
    throw fail(`scales has ${packed.scales.length} values, expected ${groups * outFeatures}.`);
  if (packed.gIdx !== undefined) {
    if (packed.gIdx.length !== inFeatures)
      throw fail(`g_idx has ${packed.gIdx.length} values, expected ${inFeatures}.`);
    for (let k = 0; k < inFeatures; k++) {
      if (packed.gIdx[k] !== Math.floor(k / g)) {
        throw fail(
          `g_idx is not sequential (act-order / desc_act checkpoints are not supported in this version; quantize with desc_act=False).`,
        );
      }
    }
  }
  const codes = new Int8Array(outFeatures * inFeatures);
  for (let k = 0; k < inFeatures; k++) {
    for (let o = 0; o < outFeatures; o++) {
      const q =
        method === 'awq'
          ? (packed.qweight[k * o8 + (o >> 3)]! >>> (4 * AWQ_REVERSE[o & 7]!)) & 0xf
          : (packed.qweight[(k >> 3) * outFeatures + o]! >>> (4 * (k & 7))) & 0xf;
      codes[o * inFeatures + k] = q - 8;
    }
  }
  const scales = new Float32Array(outFeatures * groups);
  const offsets = new Float32Array(outFeatures * groups);
  for (let gi = 0; gi < groups; gi++) {
    for (let o = 0; o < outFeatures; o++) {
      const word = packed.qzeros[gi * o8 + (o >> 3)]!;
      const z =
        method === 'awq'
          ? (word >>> (4 * AWQ_REVERSE[o & 7]!)) & 0xf
          : ((word >>> (4 * (o & 7))) & 0xf) + gptqZeroOffset;
      const s = packed.scales[gi * outFeatures + o]!;
      if (!Number.isFinite(s)) throw fail(`scale of row ${o}, group ${gi} is not finite.`);
      scales[o * groups + gi] = s;
      offsets[o * groups + gi] = Math.fround((8 - z) * s);
    }
  }
  return {
    qweight: Tensor.fromStorage(packInt4(codes), [outFeatures, inFeatures / 2], 'u8'),
    scales: Tensor.fromStorage(scales, [outFeatures, groups], 'f32'),
    offsets: Tensor.fromStorage(offsets, [outFeatures, groups], 'f32'),
    groupSize: g,
  };
}
