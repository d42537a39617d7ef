/** The CPU references' shared inner loop of the linear family (src/ops/linear.ts, src/ops/quant.ts). */

/**
 * `rows × n` by `out × n` dot products: `y[r, o] = act(Σ_k x[r, k] · w[o, k] + bias[o])`, float64 sums.
 * Shared by the float and quantized linears; `rowScale` (per output) multiplies the sum before the bias.
 */
export function matmulRowsByWeightRows(
  x: Float32Array,
  rows: number,
  w: Float32Array | Float64Array | Int8Array,
  outFeatures: number,
  n: number,
  out: Float32Array,
  epilogue: { bias?: Float32Array | undefined; scale?: Float32Array | undefined; act: (v: number) => number },
): void {
  const { bias, scale, act } = epilogue;
  for (let r = 0; r < rows; r++) {
    const xBase = r * n;
    for (let o = 0; o < outFeatures; o++) {
      const wBase = o * n;
      // Four independent partial sums keep the loop fast without changing float64 accuracy meaningfully.
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let k = 0;
      for (; k + 3 < n; k += 4) {
        s0 += x[xBase + k]! * w[wBase + k]!;
        s1 += x[xBase + k + 1]! * w[wBase + k + 1]!;
        s2 += x[xBase + k + 2]! * w[wBase + k + 2]!;
        s3 += x[xBase + k + 3]! * w[wBase + k + 3]!;
      }
      for (; k < n; k++) s0 += x[xBase + k]! * w[wBase + k]!;
      let v = s0 + s1 + (s2 + s3);
      if (scale !== undefined) v *= scale[o]!;
      if (bias !== undefined) v += bias[o]!;
      out[r * outFeatures + o] = act(v);
    }
  }
}
