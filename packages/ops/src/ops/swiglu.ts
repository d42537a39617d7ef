import { checkFloat, checkRank, checkSameDtype, checkShape, commonDevice } from '../check.js';
import { cudaSwiglu, cudaSwigluFused } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { QkShapeError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { formatShape, leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { type ElementwiseOptions, siluScalar } from './activations.js';

/**
 * SwiGLU on separate gate and up projections, the activation of Qwen3's MLP (`Qwen3MLP`):
 *
 * `y = silu(gate) · up`
 *
 * `gate` and `up` are `[..., ffn]` of one dtype. Float64 math, one rounding (HF rounds `silu(gate)` to the
 * model dtype before the product).
 */
export function swiglu<D extends FloatDType>(
  gate: Tensor<D>,
  up: Tensor<NoInfer<D>>,
  options: ElementwiseOptions = {},
): Tensor<D> {
  const op = 'swiglu';
  checkSwigluArgs(op, gate, up);
  if (commonDevice(op, { gate, up }) === 'cuda') return cudaSwiglu(gate, up, options.out);
  return writeCpuOutput(op, swigluCpu(gate, up), options.out);
}

/** Checks the operands of the separate-projection SwiGLU (`swiglu`, `swigluEager`). */
export function checkSwigluArgs(op: string, gate: Tensor, up: Tensor): void {
  checkFloat(op, 'gate', gate);
  checkFloat(op, 'up', up);
  checkSameDtype(op, 'up', up, gate, 'gate');
  checkShape(op, 'up', up, gate.shape, 'gate and up projections have equal shapes');
}

/** The CPU reference of {@link swiglu}: float64 math, one rounding. */
export function swigluCpu<D extends FloatDType>(gate: Tensor<D>, up: Tensor<D>): Tensor<D> {
  const g = readFloats(gate);
  const u = readFloats(up);
  const out = new Float32Array(g.length);
  for (let i = 0; i < g.length; i++) out[i] = siluScalar(g[i]!) * u[i]!;
  return fromFloats(out, gate.shape, gate.dtype);
}

/**
 * SwiGLU on a fused gate-up projection: `gateUp` is `[..., 2·ffn]` holding the gate in `[..., :ffn]` and up in
 * `[..., ffn:]` (what concatenating the rows of `gate_proj` and `up_proj` into one weight produces). Returns
 * `[..., ffn]` = `silu(gate) · up`.
 */
export function swigluFused<D extends FloatDType>(
  gateUp: Tensor<D>,
  options: ElementwiseOptions = {},
): Tensor<D> {
  const op = 'swigluFused';
  checkFloat(op, 'gateUp', gateUp);
  checkRank(op, 'gateUp', gateUp, { min: 1 });
  const width = gateUp.shape[gateUp.rank - 1]!;
  if (width % 2 !== 0) {
    throw new QkShapeError({
      op,
      arg: 'gateUp',
      expected: 'an even last axis (gate then up)',
      got: formatShape(gateUp.shape),
    });
  }
  if (commonDevice(op, { gateUp }) === 'cuda') return cudaSwigluFused(gateUp, options.out);
  const ffn = width / 2;
  const rows = leadingSize(gateUp.shape);
  const src = readFloats(gateUp);
  const out = new Float32Array(rows * ffn);
  for (let r = 0; r < rows; r++) {
    const inBase = r * width;
    const outBase = r * ffn;
    for (let i = 0; i < ffn; i++) out[outBase + i] = siluScalar(src[inBase + i]!) * src[inBase + ffn + i]!;
  }
  return writeCpuOutput(op, fromFloats(out, [...gateUp.shape.slice(0, -1), ffn], gateUp.dtype), options.out);
}
