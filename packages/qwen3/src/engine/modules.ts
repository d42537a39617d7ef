/**
 * The swappable modules of the layered engine and their built-in variants. A module is a function over device
 * tensors that writes into buffers the engine owns (`out`), so a decode step can be captured into a CUDA graph
 * once and replayed. `fused` variants are qk's fused kernels; `eager` variants launch one kernel per PyTorch eager
 * op (the baseline that patching is measured against, as HF's eager modules are in the seeds).
 */
import {
  add,
  attention,
  type FloatDType,
  fusedAddRmsnorm,
  QkValueError,
  qkNorm,
  qkNormRope,
  rmsnorm,
  rmsnormEager,
  rope,
  swigluEager,
  type Tensor,
} from '@qk/ops';
import type { ModuleKind, PatchSpec } from '../types.js';
import { type Projection, project, projectSwiglu } from './projections.js';

type T = Tensor<FloatDType>;

/**
 * RMSNorm between sub-blocks. With `residual`: `h = x + residual` is written to `residualOut` and
 * `out = rmsnorm(h)`; without: `out = rmsnorm(x)`.
 */
export type RmsnormModule = (args: {
  x: T;
  residual: T | null;
  weight: T;
  eps: number;
  out: T;
  residualOut: T;
}) => void;

/** Per-head QK-norm then RoPE on `x` `[tokens, heads, headDim]` at device `positions` (i32 `[tokens]`). */
export type RopeModule = (args: {
  x: T;
  normWeight: T;
  positions: Tensor<'i32'>;
  theta: number;
  eps: number;
  out: T;
}) => void;

/**
 * The SwiGLU MLP: `out = down(silu(gate(x)) · up(x))`; `gateUp` is the fused `[2·ffn, hidden]` weight, `gate` and
 * `up` views of its halves. Each is a {@link Projection}: a float tensor, or on an int8/int4 model a quantized
 * weight; `project(x, w)` (exported) applies either.
 */
export type MlpModule = (args: {
  x: T;
  gateUp: Projection;
  gate: Projection;
  up: Projection;
  down: Projection;
  out: T;
}) => void;

/**
 * Attention of `q` `[tokens, heads, headDim]` over the cache rows `k`, `v` `[rows, kvHeads, headDim]`. A decode step
 * passes `kvLength` (device i32, the live rows; `k`/`v` are the whole cache); a prefill passes the live rows and
 * `positionOffset` (causal).
 */
export type AttentionModule = (args: {
  q: T;
  k: T;
  v: T;
  kvLength: Tensor<'i32'> | null;
  positionOffset: number;
  workspace: Tensor<'u8'>;
  out: T;
}) => void;

export interface Modules {
  rmsnorm: RmsnormModule;
  rope: RopeModule;
  mlp: MlpModule;
  attention: AttentionModule;
}

const RMSNORM: Record<string, RmsnormModule> = {
  fused: ({ x, residual, weight, eps, out, residualOut }) => {
    if (residual === null) rmsnorm(x, weight, { eps, out });
    else fusedAddRmsnorm(x, residual, weight, { eps, out, residualOut });
  },
  eager: ({ x, residual, weight, eps, out, residualOut }) => {
    if (residual === null) {
      rmsnormEager(x, weight, { eps, out });
      return;
    }
    add(x, residual, { out: residualOut });
    rmsnormEager(residualOut, weight, { eps, out });
  },
};

const ROPE: Record<string, RopeModule> = {
  fused: ({ x, normWeight, positions, theta, eps, out }) =>
    void qkNormRope(x, normWeight, { positions, theta, eps, out }),
  eager: ({ x, normWeight, positions, theta, eps, out }) => {
    const normed = qkNorm(x, normWeight, { eps });
    rope(normed, { positions, theta, out });
    normed.dispose();
  },
};

const MLP: Record<string, MlpModule> = {
  fused: ({ x, gateUp, down, out }) => {
    // Float: SwiGLU in the gate/up GEMV's epilogue (one kernel up to 8 rows); quantized: the GEMV, then swigluFused.
    const h = projectSwiglu(x, gateUp);
    project(h, down, out);
    h.dispose();
  },
  eager: ({ x, gate, up, down, out }) => {
    const g = project(x, gate);
    const u = project(x, up);
    const h = swigluEager(g, u);
    project(h, down, out);
    for (const t of [g, u, h]) t.dispose();
  },
};

const ATTENTION: Record<string, AttentionModule> = {
  flash: ({ q, k, v, kvLength, positionOffset, workspace, out }) => {
    if (kvLength !== null) attention(q, k, v, { kvLength, workspace, out });
    else attention(q, k, v, { positionOffset, workspace, out });
  },
};

export const BUILTIN_VARIANTS: { readonly [K in ModuleKind]: Readonly<Record<string, Modules[K]>> } = {
  rmsnorm: RMSNORM,
  rope: ROPE,
  mlp: MLP,
  attention: ATTENTION,
};

/** The variants each module kind starts with: the fastest correct ones. */
export const DEFAULT_VARIANTS: Readonly<Record<ModuleKind, string>> = Object.freeze({
  rmsnorm: 'fused',
  rope: 'fused',
  mlp: 'fused',
  attention: 'flash',
});

const KINDS = Object.keys(DEFAULT_VARIANTS) as ModuleKind[];

/** Names of the variants per kind, plus `'custom'` for a user function. */
export function listVariants(): Readonly<Record<ModuleKind, readonly string[]>> {
  return Object.fromEntries(KINDS.map((k) => [k, Object.keys(BUILTIN_VARIANTS[k])])) as unknown as Record<
    ModuleKind,
    readonly string[]
  >;
}

/**
 * Applies `spec` to `current` (names and functions), returning the new table and names. Unknown kinds, unknown
 * variant names and non-functions are refused before anything changes.
 */
export function resolvePatch(
  current: { modules: Modules; names: Record<ModuleKind, string> },
  spec: PatchSpec,
): { modules: Modules; names: Record<ModuleKind, string> } {
  if (spec === null || typeof spec !== 'object') {
    throw new QkValueError('patch', 'spec', 'must be an object such as { rmsnorm: "eager" }.');
  }
  const modules = { ...current.modules };
  const names = { ...current.names };
  for (const [kind, value] of Object.entries(spec)) {
    if (!KINDS.includes(kind as ModuleKind)) {
      throw new QkValueError('patch', kind, `is not a module kind; patchable kinds: ${KINDS.join(', ')}.`);
    }
    const k = kind as ModuleKind;
    if (value === undefined) continue;
    if (typeof value === 'function') {
      (modules as Record<ModuleKind, unknown>)[k] = value;
      names[k] = 'custom';
    } else if (typeof value === 'string' && Object.hasOwn(BUILTIN_VARIANTS[k], value)) {
      (modules as Record<ModuleKind, unknown>)[k] = BUILTIN_VARIANTS[k][value];
      names[k] = value;
    } else {
      throw new QkValueError(
        'patch',
        k,
        `must be a function or one of ${Object.keys(BUILTIN_VARIANTS[k])
          .map((n) => `"${n}"`)
          .join(', ')}, got ${JSON.stringify(value)}.`,
      );
    }
  }
  return { modules, names };
}

/** The default module table. */
export function defaultModules(): { modules: Modules; names: Record<ModuleKind, string> } {
  return {
    modules: {
      rmsnorm: RMSNORM.fused!,
      rope: ROPE.fused!,
      mlp: MLP.fused!,
      attention: ATTENTION.flash!,
    },
    names: { ...DEFAULT_VARIANTS },
  };
}
