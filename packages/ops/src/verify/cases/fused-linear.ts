/**
 * Verify cases of the projections with fused prologues and epilogues: rmsnormLinear (plain, with a residual add,
 * with SwiGLU, both) and linearSwiglu, on each side of the fused kernels' row limits (64 with a norm, 8 without; 32
 * for the Hopper GEMM with the SwiGLU epilogue) and at the Qwen3 layer shapes. Inputs, weights and layer shapes
 * are those of the linear cases (linear.ts).
 */
import type { FloatDType } from '../../dtype.js';
import { linearSwiglu, rmsnormLinear } from '../../ops/linear.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { type Dims, describe, input, layers, multiRow, weight } from './linear.js';
import { ODD_WIDTHS, QWEN3_SHAPES, VERIFY_DTYPES } from './shapes.js';

type Tag = VerifyCase['tag'];
type F = Tensor<FloatDType>;

const EPS = 1e-6;

/** What an rmsnormLinear case fuses besides the norm and the projection. */
interface NormLinearVariant {
  /** Add a residual before the norm; the sum written to `residualOut` is compared too. */
  residual?: boolean;
  /** SwiGLU epilogue: the weight holds 2·N rows (gate, then up) for N outputs. */
  glu?: boolean;
  label?: string;
}

function rmsnormLinearCase(dtype: FloatDType, d: Dims, tag: Tag, v: NormLinearVariant = {}): VerifyCase {
  const extra = `${v.label ? ` ${v.label}` : ''}${v.residual ? ' +residual' : ''}${v.glu ? ' swiglu' : ''}`;
  return {
    op: 'rmsnormLinear',
    dtype,
    shape: describe(d, extra),
    tag,
    tolerance: toleranceFor('rmsnormLinear', dtype),
    make(seed) {
      const x = input(d, dtype, seed);
      const g = Tensor.rand([d.k], { dtype, seed: seed + 1, low: 0.5, high: 1.5 });
      const w = weight(v.glu ? 2 * d.n : d.n, d.k, dtype, seed + 2);
      const options = { eps: EPS, ...(v.glu ? { glu: 'swiglu' as const } : {}) };
      // The SwiGLU product runs past the O(1) range of the dot-product atol (see CaseInstance.roundingSlack).
      const slack = v.glu ? { roundingSlack: [0] } : {};
      if (!v.residual) {
        return {
          inputs: [x, g, w],
          expected: [rmsnormLinear(x, g, w, options)],
          run: ([gx, gg, gw], [out]) => void rmsnormLinear(gx as F, gg as F, gw as F, { ...options, out }),
          ...slack,
        };
      }
      const residual = input(d, dtype, seed + 3);
      const sum = Tensor.empty([d.m, d.k], dtype);
      const y = rmsnormLinear(x, g, w, { ...options, residual, residualOut: sum });
      return {
        inputs: [x, g, w, residual],
        expected: [y, sum],
        run: ([gx, gg, gw, gr], [out, residualOut]) =>
          void rmsnormLinear(gx as F, gg as F, gw as F, { ...options, residual: gr as F, residualOut, out }),
        ...slack,
      };
    },
  };
}

/** linearSwiglu: x `[M, K]` by a `[2N, K]` gate-up weight, N outputs. */
function linearSwigluCase(dtype: FloatDType, d: Dims, tag: Tag, label = ''): VerifyCase {
  return {
    op: 'linearSwiglu',
    dtype,
    shape: describe(d, label ? ` ${label}` : ''),
    tag,
    tolerance: toleranceFor('linearSwiglu', dtype),
    make(seed) {
      const x = input(d, dtype, seed);
      const gateUp = weight(2 * d.n, d.k, dtype, seed + 1);
      return {
        inputs: [x, gateUp],
        expected: [linearSwiglu(x, gateUp)],
        run: ([gx, gw], [out]) => void linearSwiglu(gx as F, gw as F, { out }),
        roundingSlack: [0],
      };
    },
  };
}

function rmsnormLinearCases(dtype: FloatDType): VerifyCase[] {
  const cases: VerifyCase[] = [];
  for (const k of ODD_WIDTHS) {
    for (const n of [1, 111, 989]) cases.push(rmsnormLinearCase(dtype, { m: 1, k, n }, 'odd'));
    cases.push(rmsnormLinearCase(dtype, { m: 3, k, n: 111 }, 'odd'));
    cases.push(rmsnormLinearCase(dtype, { m: 13, k, n: 111 }, 'odd'));
    cases.push(rmsnormLinearCase(dtype, { m: 1, k, n: 111 }, 'odd', { residual: true }));
    cases.push(rmsnormLinearCase(dtype, { m: 13, k, n: 7 }, 'odd', { residual: true }));
    cases.push(rmsnormLinearCase(dtype, { m: 1, k, n: 111 }, 'odd', { glu: true }));
    cases.push(rmsnormLinearCase(dtype, { m: 3, k, n: 989 }, 'odd', { glu: true }));
    cases.push(rmsnormLinearCase(dtype, { m: 5, k, n: 111 }, 'odd', { residual: true, glu: true }));
  }
  cases.push(
    rmsnormLinearCase(dtype, { m: 1, k: 24584, n: 64 }, 'edge', { label: 'x past the shared-memory stage' }),
  );
  cases.push(rmsnormLinearCase(dtype, { m: 8, k: 8192, n: 96 }, 'edge', { label: 'x read through L1' }));
  // The fused kernel's last row count, and the separate ops one row above it.
  const unfused: [NormLinearVariant, string][] = [
    [{}, 'rmsnorm then linear'],
    [{ residual: true }, 'fusedAddRmsnorm then linear'],
    [{ glu: true }, 'rmsnorm, then the SwiGLU projection'],
    [{ residual: true, glu: true }, 'fusedAddRmsnorm, then the SwiGLU projection'],
  ];
  for (const [variant, ops] of unfused) {
    cases.push(rmsnormLinearCase(dtype, { m: 64, k: 1024, n: 96 }, 'edge', variant));
    cases.push(
      rmsnormLinearCase(dtype, { m: 65, k: 1024, n: 96 }, 'edge', { ...variant, label: `unfused: ${ops}` }),
    );
  }
  for (const s of QWEN3_SHAPES) {
    const l = layers(s);
    for (const layer of [...l.qkv, l.gateUp]) {
      const name = { label: layer.name };
      cases.push(rmsnormLinearCase(dtype, { m: 1, ...layer }, s.tag, name));
      if (multiRow(dtype, layer)) cases.push(rmsnormLinearCase(dtype, { m: 4, ...layer }, s.tag, name));
      if (s.tag === 'qwen3-0.6b') cases.push(rmsnormLinearCase(dtype, { m: 64, ...layer }, s.tag, name));
    }
    if (s.tag === 'qwen3-8b')
      cases.push(rmsnormLinearCase(dtype, { m: 64, ...l.qkv[1]! }, s.tag, { label: 'k/v' }));
    // The decode layer's two fused prologues: residual + norm + q projection, residual + norm + gate/up + SwiGLU.
    const q = l.qkv[0]!;
    const gateUpWeights = { ...l.gateUp, n: 2 * l.gateUp.n };
    cases.push(rmsnormLinearCase(dtype, { m: 1, ...q }, s.tag, { label: q.name, residual: true }));
    const mlp = { label: 'gate/up', residual: true, glu: true };
    cases.push(rmsnormLinearCase(dtype, { m: 1, ...l.gateUp }, s.tag, mlp));
    // f16 and f32 keep only the case above of the 8B's 1e8-weight gate/up (their reference takes seconds).
    if (multiRow(dtype, gateUpWeights)) {
      cases.push(rmsnormLinearCase(dtype, { m: 1, ...l.gateUp }, s.tag, { label: 'gate/up', glu: true }));
      cases.push(rmsnormLinearCase(dtype, { m: 4, ...l.gateUp }, s.tag, mlp));
    }
    if (s.tag === 'qwen3-0.6b') {
      cases.push(rmsnormLinearCase(dtype, { m: 64, ...q }, s.tag, { label: q.name, residual: true }));
      cases.push(rmsnormLinearCase(dtype, { m: 64, ...l.gateUp }, s.tag, mlp));
      cases.push(rmsnormLinearCase(dtype, { m: 65, ...l.gateUp }, s.tag, mlp));
    }
  }
  return cases;
}

function linearSwigluCases(dtype: FloatDType): VerifyCase[] {
  const cases: VerifyCase[] = [];
  for (const k of ODD_WIDTHS) {
    for (const n of [1, 111, 989]) cases.push(linearSwigluCase(dtype, { m: 1, k, n }, 'odd'));
    // The fused GEMV up to 8 rows, linear then swigluFused above.
    for (const m of [3, 8, 9]) cases.push(linearSwigluCase(dtype, { m, k, n: 111 }, 'odd'));
  }
  cases.push(linearSwigluCase(dtype, { m: 1, k: 24584, n: 64 }, 'edge', 'x past the shared-memory stage'));
  cases.push(linearSwigluCase(dtype, { m: 32, k: 1024, n: 96 }, 'edge', 'small-M linear then swigluFused'));
  // Above 16 rows on Hopper (32 elsewhere): one GEMM pairing gate and up in its epilogue. Row, output and K tails of its 128-row
  // tiles and 128/64/32-wide output tiles; K not a multiple of 8 takes linear + swigluFused instead.
  for (const [m, k, n] of [
    [33, 1024, 96],
    [129, 1000, 1],
    [130, 64, 33],
    [257, 1000, 129],
    [300, 520, 1000],
    [77, 1001, 250],
  ] as const) {
    cases.push(linearSwigluCase(dtype, { m, k, n }, 'odd'));
  }
  // Few output tiles and a long K: the gate and up sums split across K slices, paired after the last slice's sum.
  cases.push(linearSwigluCase(dtype, { m: 48, k: 4104, n: 200 }, 'edge', 'Hopper split K'));
  // The swapped form (up to 64 rows): 64 gate and 64 up rows per tile, paired in registers; from 3 rows when the fused
  // weight has 2,048 rows or more.
  for (const [m, k, n] of [
    [3, 1000, 1025],
    [16, 4104, 1100],
    [50, 520, 77],
  ] as const) {
    cases.push(linearSwigluCase(dtype, { m, k, n }, 'edge', 'Hopper swapped'));
  }
  // Stream K in the swapped form: 49 pairs of 64 gate and 64 up rows over one run per SM.
  cases.push(linearSwigluCase(dtype, { m: 16, k: 4104, n: 3100 }, 'edge', 'Hopper stream K'));
  for (const s of QWEN3_SHAPES) {
    const { gateUp } = layers(s);
    const weights = { ...gateUp, n: 2 * gateUp.n };
    cases.push(linearSwigluCase(dtype, { m: 1, ...gateUp }, s.tag, gateUp.name));
    if (multiRow(dtype, weights)) {
      cases.push(linearSwigluCase(dtype, { m: 8, ...gateUp }, s.tag, gateUp.name));
      cases.push(linearSwigluCase(dtype, { m: 9, ...gateUp }, s.tag, gateUp.name));
    }
    if (s.tag === 'qwen3-0.6b') {
      cases.push(linearSwigluCase(dtype, { m: 64, ...gateUp }, s.tag, gateUp.name));
      cases.push(linearSwigluCase(dtype, { m: 200, ...gateUp }, s.tag, gateUp.name));
    }
  }
  return cases;
}

export const FUSED_LINEAR_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  ...rmsnormLinearCases(dtype),
  ...linearSwigluCases(dtype),
]);
