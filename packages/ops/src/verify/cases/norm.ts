/** Verify cases of the RMSNorm family. */
import type { FloatDType } from '../../dtype.js';
import { fusedAddRmsnorm, qkNorm, rmsnorm } from '../../ops/rmsnorm.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { dims, ODD_WIDTHS, QWEN3_SHAPES, VERIFY_DTYPES } from './shapes.js';

const EPS = 1e-6;

function rmsnormCase(dtype: FloatDType, rows: number, n: number, tag: VerifyCase['tag']): VerifyCase {
  return {
    op: 'rmsnorm',
    dtype,
    shape: dims(rows, n),
    tag,
    tolerance: toleranceFor('rmsnorm', dtype),
    make(seed) {
      const x = Tensor.randn([rows, n], { dtype, seed });
      const w = Tensor.randn([n], { dtype, seed: seed + 1 });
      return {
        inputs: [x, w],
        expected: [rmsnorm(x, w, { eps: EPS })],
        run: ([gx, gw], [out]) =>
          void rmsnorm(gx as Tensor<FloatDType>, gw as Tensor<FloatDType>, { eps: EPS, out }),
      };
    },
  };
}

function fusedAddCase(dtype: FloatDType, rows: number, n: number, tag: VerifyCase['tag']): VerifyCase {
  return {
    op: 'fusedAddRmsnorm',
    dtype,
    shape: dims(rows, n),
    tag,
    tolerance: toleranceFor('fusedAddRmsnorm', dtype),
    make(seed) {
      const x = Tensor.randn([rows, n], { dtype, seed });
      const r = Tensor.randn([rows, n], { dtype, seed: seed + 1 });
      const w = Tensor.randn([n], { dtype, seed: seed + 2 });
      const ref = fusedAddRmsnorm(x, r, w, { eps: EPS });
      return {
        inputs: [x, r, w],
        expected: [ref.out, ref.residual],
        run: ([gx, gr, gw], [out, residualOut]) =>
          void fusedAddRmsnorm(gx as Tensor<FloatDType>, gr as Tensor<FloatDType>, gw as Tensor<FloatDType>, {
            eps: EPS,
            out,
            residualOut,
          }),
      };
    },
  };
}

function qkNormCase(
  dtype: FloatDType,
  tokens: number,
  heads: number,
  headDim: number,
  tag: VerifyCase['tag'],
): VerifyCase {
  return {
    op: 'qkNorm',
    dtype,
    shape: dims(tokens, heads, headDim),
    tag,
    tolerance: toleranceFor('qkNorm', dtype),
    make(seed) {
      const x = Tensor.randn([tokens, heads, headDim], { dtype, seed });
      const w = Tensor.randn([headDim], { dtype, seed: seed + 1 });
      return {
        inputs: [x, w],
        expected: [qkNorm(x, w, { eps: EPS })],
        run: ([gx, gw], [out]) =>
          void qkNorm(gx as Tensor<FloatDType>, gw as Tensor<FloatDType>, { eps: EPS, out }),
      };
    },
  };
}

export const NORM_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  ...ODD_WIDTHS.map((n) => rmsnormCase(dtype, 3, n, 'odd')),
  ...ODD_WIDTHS.map((n) => fusedAddCase(dtype, 3, n, 'odd')),
  rmsnormCase(dtype, 1, 40000, 'edge'), // wider than the register-resident path
  ...QWEN3_SHAPES.flatMap((s) => [
    rmsnormCase(dtype, 1, s.hidden, s.tag),
    rmsnormCase(dtype, 64, s.hidden, s.tag),
    fusedAddCase(dtype, 1, s.hidden, s.tag),
    fusedAddCase(dtype, 64, s.hidden, s.tag),
    qkNormCase(dtype, 1, s.heads, s.headDim, s.tag),
    qkNormCase(dtype, 17, s.kvHeads, s.headDim, s.tag),
  ]),
]);
