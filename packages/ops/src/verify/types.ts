/** Types of `qk verify`: CUDA kernels checked against the `@qk/ops` references. */
import type { FloatDType } from '../dtype.js';
import type { Tensor } from '../tensor.js';
import type { Tolerance } from '../testing/tolerances.js';

/** What one case builds for a run: CPU inputs, the reference outputs, and how to run the CUDA op. */
export interface CaseInstance {
  /** Inputs on the CPU, drawn fresh from the run's seed; the runner copies them to the GPU in this order. */
  inputs: Tensor[];
  /** Reference outputs computed on the CPU from `inputs`. */
  expected: Tensor[];
  /**
   * Runs the CUDA op on `gpuInputs` (the inputs on `'cuda'`, same order), writing into `outs` — GPU tensors
   * shaped like `expected` that the runner filled with NaN (or -1 for integer outputs) beforehand.
   */
  run(gpuInputs: Tensor[], outs: Tensor[]): void;
  /**
   * Optional bit-level conditions on top of the tolerance comparison (bytes an op copies, or must leave alone):
   * a note saying what differs, or undefined when they hold.
   */
  checkBits?(actual: Tensor[], expected: Tensor[]): string | undefined;
  /**
   * Outputs (by index) whose elements may each differ by `atol` plus one rounding step of the output dtype at the
   * expected value's magnitude, instead of by `atol` alone: outputs whose range runs past the O(1) values the
   * op's absolute tolerance is set for (a SwiGLU product), where a sum taken in another order than the
   * reference's lands on the other side of a rounding boundary now and then. The relative L2 bound still holds.
   */
  roundingSlack?: readonly number[];
  /**
   * Optional custom comparison (sampling compares ids against the reference's probability intervals). Returns
   * the measured error and whether it passes. Default: relative L2 and max-abs against `tolerance`.
   */
  compare?(
    actual: Tensor[],
    expected: Tensor[],
  ): { relL2: number; maxAbs: number; pass: boolean; note?: string };
}

/** One row of the verify table. */
export interface VerifyCase {
  op: string;
  dtype: FloatDType;
  /** Human-readable sizes, e.g. `[8×4096]` or `M=1 K=1024 N=3072`. */
  shape: string;
  /** Which sweep the shape belongs to: odd sizes, Qwen3-0.6B or Qwen3-8B layer shapes, edge cases. */
  tag: 'odd' | 'qwen3-0.6b' | 'qwen3-8b' | 'edge';
  tolerance: Tolerance;
  make(seed: number): CaseInstance;
}

export interface VerifyRow {
  op: string;
  /** The case's dtype; '-' for runtime checks. */
  dtype: FloatDType | '-';
  shape: string;
  tag: VerifyCase['tag'];
  relL2: number | null;
  maxAbs: number | null;
  rtol: number;
  atol: number;
  status: 'pass' | 'fail' | 'skipped' | 'error';
  /** Why a case was skipped, failed with an exception, or extra detail of a custom comparison. */
  note?: string;
  seed: number;
}
