/**
 * What an op benchmark case is, independent of the suite: how to build rotating input sets on a backend, how to
 * call the op once, how many bytes (and FLOPs) a call must move, the PyTorch peer spec and the bar.
 */
import { type Device, type FloatDType, Tensor } from '@qk/ops';
import type { BenchBackend } from '../schema.js';

/** What the PyTorch peer script needs to rebuild a case (see peers/torch_ops.py). */
export interface PeerSpec {
  id: string;
  kind:
    | 'rmsnorm'
    | 'fused_add_rmsnorm'
    | 'rope'
    | 'swiglu'
    | 'linear'
    | 'attention_decode'
    | 'rmsnorm_linear'
    | 'attention_prefill'
    | 'linear_act'
    | 'linear_int8'
    | 'linear_int4';
  dtype: 'bfloat16' | 'float16' | 'float32';
  dims: Record<string, number>;
  rotations: number;
}

/** A bar from the issues, checked against a row once its peers are in. */
export interface BarSpec {
  text: string;
  /** Achieved bandwidth must reach this share of the copy ceiling (percent). */
  minPctOfCeiling?: number;
  /** qk must be faster than these peers (ratio > 1). */
  beat?: string[];
}

export interface OpCase {
  id: string;
  /** Chart series (the kernel or variant). */
  series: string;
  /** The case in tables. */
  label: string;
  /** Chart x (bytes, rows, sequence length …). */
  x: number;
  params: Record<string, number | string | boolean>;
  /** Bytes that must cross memory per call: inputs read once plus outputs written. */
  bytes: number;
  /** Floating-point operations per call, where compute matters (GEMM, attention). */
  flops?: number;
  bar?: BarSpec;
  /** The PyTorch peer (GPU runs only). */
  peer?: PeerSpec;
  /** Builds one input set; called once per rotation. */
  makeSet(seed: number): unknown;
  call(set: unknown): void;
  dispose(set: unknown): void;
}

/** The backend a suite's cases are built for, and the sizes that go with it. */
export interface SuiteContext {
  backend: BenchBackend;
  device: Device;
  /** bf16 on the GPU; f32 for the CPU references (their natural precision). */
  dtype: FloatDType;
  /** Bytes per element of `dtype`. */
  elementBytes: number;
  /** L2 size of the GPU (rotations are sized to exceed it twice); the CPU runs use 32 MiB. */
  l2Bytes: number;
}

export function suiteContext(backend: BenchBackend, l2Bytes: number): SuiteContext {
  return backend === 'cuda'
    ? { backend, device: 'cuda', dtype: 'bf16', elementBytes: 2, l2Bytes }
    : { backend, device: 'cpu', dtype: 'f32', elementBytes: 4, l2Bytes: 32 * 2 ** 20 };
}

/** The torch dtype name of a float dtype. */
export function torchDtype(dtype: FloatDType): PeerSpec['dtype'] {
  return dtype === 'bf16' ? 'bfloat16' : dtype === 'f16' ? 'float16' : 'float32';
}

/** How many input sets of `bytesPerSet` make a working set of at least twice the L2 cache (2 to 64). */
export function rotationsFor(bytesPerSet: number, l2Bytes: number): number {
  return Math.max(2, Math.min(64, Math.ceil((2 * l2Bytes) / Math.max(1, bytesPerSet))));
}

/** Values drawn on the host for at most this many elements; larger device tensors repeat them. */
const RANDOM_BLOCK = 1 << 20;

/**
 * A tensor of seeded normal values on the context's device. Drawing hundreds of millions of values in JS would
 * dominate a GPU run, so a block of up to 2^20 values is drawn once per seed and tiled over a CUDA tensor with
 * device copies; the bandwidth of a kernel does not depend on which finite values it reads.
 */
export function randTensor(ctx: SuiteContext, shape: number[], seed: number, std = 1): Tensor<FloatDType> {
  if (ctx.device === 'cpu') return Tensor.randn(shape, { dtype: ctx.dtype, seed, std });
  const out = Tensor.empty(shape, ctx.dtype, 'cuda');
  const flat = out.reshape([-1]);
  const block = Tensor.randn([Math.min(flat.size, RANDOM_BLOCK)], { dtype: ctx.dtype, seed, std }).to('cuda');
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

/** An uninitialised output tensor on the context's device. */
export function emptyTensor(ctx: SuiteContext, shape: number[]): Tensor<FloatDType> {
  return Tensor.empty(shape, ctx.dtype, ctx.device);
}

/** Disposes every tensor of a set built as an array (most cases). */
export function disposeAll(set: unknown): void {
  for (const t of set as { dispose(): void }[]) t.dispose();
}

/** A peer spec for the case, on the GPU only. */
export function peerFor(
  ctx: SuiteContext,
  id: string,
  kind: PeerSpec['kind'],
  dims: Record<string, number>,
  bytes: number,
): PeerSpec | undefined {
  if (ctx.backend !== 'cuda') return undefined;
  return { id, kind, dtype: torchDtype(ctx.dtype), dims, rotations: rotationsFor(bytes, ctx.l2Bytes) };
}

/** `[a×b×c]`. */
export const dimsLabel = (dims: readonly number[]) => `[${dims.join('×')}]`;
