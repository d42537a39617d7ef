/**
 * `qk bench ops`: the kernel suite of the cuda-core issue — RMSNorm at the seed's eight configs, fused
 * add+RMSNorm, RoPE, SwiGLU, decode GEMV on Qwen3 layer shapes and decode attention — each row with achieved
 * GB/s, % of the copy ceiling measured in the same run, and the ratio to PyTorch eager and torch.compile when a
 * peer result exists for the case.
 */
import { attention, type FloatDType, fusedAddRmsnorm, linear, rmsnorm, rope, swiglu, Tensor } from '@qk/ops';
import { rotationsFor, timeGpu } from '../harness.js';
import type { Summary } from '../stats.js';

/** What the PyTorch peer script needs to rebuild a case (see peers/torch_ops.py). */
export interface PeerSpec {
  id: string;
  kind: 'rmsnorm' | 'fused_add_rmsnorm' | 'rope' | 'swiglu' | 'linear' | 'attention_decode';
  dtype: 'bfloat16' | 'float16' | 'float32';
  dims: Record<string, number>;
  rotations: number;
}

export interface OpCase {
  id: string;
  group: string;
  shape: string;
  /** Bytes that must cross DRAM per call: inputs read once plus outputs written. */
  bytes: number;
  /** Bar from the issue, shown beside the row (e.g. "≥80% ceiling", "beat torch.compile"). */
  bar?: string;
  peer: PeerSpec;
  /** Builds one input set; called `rotations` times. */
  makeSet(seed: number): unknown;
  call(set: unknown): void;
  dispose(set: unknown): void;
}

export interface OpRow {
  id: string;
  group: string;
  shape: string;
  bytes: number;
  timing: Summary;
  gbPerS: number;
  pctOfCeiling: number;
  torchEagerUs?: number;
  torchCompileUs?: number;
  vsEager?: number;
  vsCompile?: number;
  bar?: string;
}

const dtype: FloatDType = 'bf16';
const BYTES = 2;

type Sets = Tensor[];
const disposeAll = (set: unknown) => {
  for (const t of set as Sets) t.dispose();
};
/** Values drawn on the host for at most this many elements; larger tensors repeat them (see randCuda). */
const RANDOM_BLOCK = 1 << 20;

/**
 * A CUDA tensor of seeded normal values. Drawing hundreds of millions of values in JS would dominate the run,
 * so a block of up to 2^20 values is drawn once per seed and tiled over the tensor with device copies; the
 * bandwidth of a kernel does not depend on which finite values it reads.
 */
function randCuda(shape: number[], seed: number, std = 1): Tensor<FloatDType> {
  const out = Tensor.empty(shape, dtype, 'cuda');
  const flat = out.reshape([-1]);
  const block = Tensor.randn([Math.min(flat.size, RANDOM_BLOCK)], { dtype, seed, std }).to('cuda');
  for (let at = 0; at < flat.size; at += block.size) {
    const n = Math.min(block.size, flat.size - at);
    const dst = flat.slice(at, at + n);
    const src = n === block.size ? block : block.slice(0, n);
    dst.copyFrom(src);
    dst.dispose();
    if (src !== block) src.dispose();
  }
  block.dispose();
  flat.dispose();
  return out;
}

function rmsnormCase(b: number, s: number, h: number, l2: number): OpCase {
  const rows = b * s;
  const bytes = (2 * rows * h + h) * BYTES;
  return {
    id: `rmsnorm-${b}x${s}x${h}`,
    group: 'rmsnorm',
    shape: `[${b}×${s}×${h}]`,
    bytes,
    bar: b === 1 && s === 8192 ? '≥80% ceiling, beat torch.compile' : 'beat torch.compile',
    peer: {
      id: `rmsnorm-${b}x${s}x${h}`,
      kind: 'rmsnorm',
      dtype: 'bfloat16',
      dims: { rows, n: h },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([rows, h], seed),
      randCuda([h], seed + 1),
      Tensor.empty([rows, h], dtype, 'cuda'),
    ],
    call: (set) => {
      const [x, w, out] = set as Sets;
      rmsnorm(x as Tensor<'bf16'>, w as Tensor<'bf16'>, { eps: 1e-6, out });
    },
    dispose: disposeAll,
  };
}

function fusedAddCase(rows: number, h: number, l2: number): OpCase {
  const bytes = (4 * rows * h + h) * BYTES;
  return {
    id: `fused-add-rmsnorm-${rows}x${h}`,
    group: 'fusedAddRmsnorm',
    shape: `[${rows}×${h}]`,
    bytes,
    bar: rows === 8192 ? '≥80% ceiling' : undefined,
    peer: {
      id: `fused-add-rmsnorm-${rows}x${h}`,
      kind: 'fused_add_rmsnorm',
      dtype: 'bfloat16',
      dims: { rows, n: h },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([rows, h], seed),
      randCuda([rows, h], seed + 1),
      randCuda([h], seed + 2),
      Tensor.empty([rows, h], dtype, 'cuda'),
      Tensor.empty([rows, h], dtype, 'cuda'),
    ],
    call: (set) => {
      const [x, r, w, out, residualOut] = set as Sets;
      fusedAddRmsnorm(x as Tensor<'bf16'>, r as Tensor<'bf16'>, w as Tensor<'bf16'>, {
        eps: 1e-6,
        out,
        residualOut,
      });
    },
    dispose: disposeAll,
  };
}

function ropeCase(seq: number, l2: number): OpCase {
  const heads = 32;
  const dim = 128;
  const bytes = 2 * seq * heads * dim * BYTES;
  return {
    id: `rope-${seq}x${heads}x${dim}`,
    group: 'rope',
    shape: `[${seq}×${heads}×${dim}]`,
    bytes,
    bar: seq === 8192 ? '≥80% ceiling' : undefined,
    peer: {
      id: `rope-${seq}x${heads}x${dim}`,
      kind: 'rope',
      dtype: 'bfloat16',
      dims: { seq, heads, dim },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([seq, heads, dim], seed),
      Tensor.arange(0, seq, { dtype: 'i32' }).to('cuda'),
      Tensor.empty([seq, heads, dim], dtype, 'cuda'),
    ],
    call: (set) => {
      const [x, positions, out] = set as Sets;
      rope(x as Tensor<'bf16'>, { positions: positions as Tensor<'i32'>, theta: 1e6, out });
    },
    dispose: disposeAll,
  };
}

function swigluCase(rows: number, ffn: number, l2: number): OpCase {
  const bytes = 3 * rows * ffn * BYTES;
  return {
    id: `swiglu-${rows}x${ffn}`,
    group: 'swiglu',
    shape: `[${rows}×${ffn}]`,
    bytes,
    bar: ffn === 18944 ? '≥80% ceiling' : undefined,
    peer: {
      id: `swiglu-${rows}x${ffn}`,
      kind: 'swiglu',
      dtype: 'bfloat16',
      dims: { rows, ffn },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([rows, ffn], seed),
      randCuda([rows, ffn], seed + 1),
      Tensor.empty([rows, ffn], dtype, 'cuda'),
    ],
    call: (set) => {
      const [g, u, out] = set as Sets;
      swiglu(g as Tensor<'bf16'>, u as Tensor<'bf16'>, { out });
    },
    dispose: disposeAll,
  };
}

function gemvCase(model: string, layer: string, n: number, k: number, l2: number): OpCase {
  const bytes = (n * k + k + n) * BYTES;
  return {
    id: `gemv-${model}-${layer}`,
    group: 'gemv',
    shape: `${model} ${layer} N=${n} K=${k}`,
    bytes,
    bar: n * k * BYTES >= 16 * 2 ** 20 ? '≥85% ceiling, beat F.linear' : 'beat F.linear',
    peer: {
      id: `gemv-${model}-${layer}`,
      kind: 'linear',
      dtype: 'bfloat16',
      dims: { m: 1, n, k },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([1, k], seed),
      randCuda([n, k], seed + 1, 0.02),
      Tensor.empty([1, n], dtype, 'cuda'),
    ],
    call: (set) => {
      const [x, w, out] = set as Sets;
      linear(x as Tensor<'bf16'>, w as Tensor<'bf16'>, { out });
    },
    dispose: disposeAll,
  };
}

function decodeAttentionCase(
  model: string,
  qHeads: number,
  kvHeads: number,
  kvLen: number,
  l2: number,
): OpCase {
  const dim = 128;
  const bytes = 2 * kvLen * kvHeads * dim * BYTES;
  return {
    id: `attention-decode-${model}-${kvLen}`,
    group: 'attentionDecode',
    shape: `${model} q${qHeads}/kv${kvHeads}×${dim} ctx ${kvLen}`,
    bytes,
    bar: kvLen === 8192 ? '≥70% ceiling' : undefined,
    peer: {
      id: `attention-decode-${model}-${kvLen}`,
      kind: 'attention_decode',
      dtype: 'bfloat16',
      dims: { qHeads, kvHeads, dim, kvLen },
      rotations: rotationsFor(bytes, l2),
    },
    makeSet: (seed) => [
      randCuda([1, qHeads, dim], seed),
      randCuda([kvLen, kvHeads, dim], seed + 1),
      randCuda([kvLen, kvHeads, dim], seed + 2),
      Tensor.empty([1, qHeads, dim], dtype, 'cuda'),
      // Persistent split-KV scratch (graph capture must not allocate it per call); far above what 16k needs.
      Tensor.empty([16 * 2 ** 20], 'u8', 'cuda'),
    ],
    call: (set) => {
      const [q, k, v, out, ws] = set as Sets;
      attention(q as Tensor<'bf16'>, k as Tensor<'bf16'>, v as Tensor<'bf16'>, {
        out,
        workspace: ws as Tensor<'u8'>,
      });
    },
    dispose: disposeAll,
  };
}

/** Qwen3 decode GEMV shapes: [name, N, K]. */
const GEMV_SHAPES: Record<string, [string, number, number][]> = {
  '0.6b': [
    ['qkv', (16 + 8 + 8) * 128, 1024],
    ['o', 1024, 16 * 128],
    ['gate_up', 2 * 3072, 1024],
    ['down', 1024, 3072],
    ['lm_head', 151936, 1024],
  ],
  '8b': [
    ['qkv', (32 + 8 + 8) * 128, 4096],
    ['o', 4096, 32 * 128],
    ['gate_up', 2 * 12288, 4096],
    ['down', 4096, 12288],
    ['lm_head', 151936, 4096],
  ],
};

/** Every case of the suite, sized for a GPU with `l2Bytes` of L2. */
export function opsCases(l2Bytes: number): OpCase[] {
  const rms: [number, number][] = [
    [1, 128],
    [1, 512],
    [1, 1024],
    [1, 2048],
    [1, 4096],
    [4, 512],
    [8, 256],
    [1, 8192],
  ];
  return [
    ...rms.map(([b, s]) => rmsnormCase(b, s, 4096, l2Bytes)),
    ...[512, 2048, 8192].map((rows) => fusedAddCase(rows, 4096, l2Bytes)),
    ...[512, 1024, 2048, 4096, 8192].map((seq) => ropeCase(seq, l2Bytes)),
    ...[4096, 11008, 14336, 18944].map((ffn) => swigluCase(2048, ffn, l2Bytes)),
    ...Object.entries(GEMV_SHAPES).flatMap(([model, shapes]) =>
      shapes.map(([layer, n, k]) => gemvCase(model, layer, n, k, l2Bytes)),
    ),
    ...[512, 2048, 8192, 16384].flatMap((len) => [
      decodeAttentionCase('0.6b', 16, 8, len, l2Bytes),
      decodeAttentionCase('8b', 32, 8, len, l2Bytes),
    ]),
  ];
}

/** Runs one case: builds its rotating input sets, times it, frees the sets. */
export function runOpCase(c: OpCase, ceilingGbPerS: number, l2Bytes: number): OpRow {
  const rotations = rotationsFor(c.bytes, l2Bytes);
  const sets = Array.from({ length: rotations }, (_, i) => c.makeSet(1000 + i * 17));
  try {
    const timing = timeGpu(sets, (s) => c.call(s));
    const gbPerS = c.bytes / (timing.median * 1e3);
    return {
      id: c.id,
      group: c.group,
      shape: c.shape,
      bytes: c.bytes,
      timing,
      gbPerS,
      pctOfCeiling: (100 * gbPerS) / ceilingGbPerS,
      ...(c.bar ? { bar: c.bar } : {}),
    };
  } finally {
    for (const s of sets) c.dispose(s);
  }
}
