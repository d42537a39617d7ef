/**
 * CUDA paths of argmax and sampling (kernels: packages/cuda-core/csrc/kernels/sampling.cu).
 *
 * `sample` draws its per-row uniforms on the host (the caller passes them, from the same seeded stream the CPU
 * reference uses) and uploads them as f64. Its scratch is a CUDA u8 tensor of `sampleWorkspaceBytes(rows, vocab)`,
 * allocated per call and disposed once the launch is queued (the caching allocator hands the block only to later
 * work on the same stream); CUDA-graph users pass a persistent `workspace` instead. The kernel writes id −1 for a
 * row it refuses (NaN or +∞ logits, or no finite maximum); unless `checkIds` is false the ids are then read back
 * and such a row throws `QkValueError`, as the CPU path does before drawing.
 */
import { checkWorkspace } from '../check.js';
import type { FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';
import { Tensor } from '../tensor.js';
import { cudaOutput, dtypeCode, launch, ptr } from './common.js';

export function cudaArgmax(x: Tensor<FloatDType>, out?: Tensor): Tensor<'i32'> {
  const op = 'argmax';
  const n = x.shape[x.rank - 1]!;
  const y = cudaOutput(op, out, x.shape.slice(0, -1), 'i32');
  const rows = x.size / n;
  if (rows === 0) return y;
  launch(op, (b) => b.argmax(dtypeCode(x.dtype), ptr(y), ptr(x), rows, n));
  return y;
}

/** What `sample` validated, handed to the CUDA path. */
export interface CudaSampleParams {
  temperature: number;
  topK: number;
  topP: number;
  /** One uniform in [0, 1) per row, or null on the greedy path (temperature 0). */
  uniforms: Float64Array | null;
  /** Read the ids back and throw for refused rows (default true). */
  checkIds: boolean;
}

export function cudaSample(
  logits: Tensor<FloatDType>,
  p: CudaSampleParams,
  out?: Tensor,
  workspace?: Tensor,
): Tensor<'i32'> {
  const op = 'sample';
  const vocab = logits.shape[logits.rank - 1]!;
  const y = cudaOutput(op, out, logits.shape.slice(0, -1), 'i32');
  const rows = logits.size / vocab;
  if (rows === 0) return y;
  // temperature 0 and topK 1 take the argmax: no uniforms, no scratch.
  const greedy = p.temperature === 0 || p.topK === 1;
  launch(op, (b) => {
    if (greedy) {
      b.sample(
        dtypeCode(logits.dtype),
        ptr(y),
        ptr(logits),
        rows,
        vocab,
        p.temperature,
        p.topK,
        p.topP,
        0n,
        0n,
        0,
      );
      return;
    }
    if (p.uniforms === null || p.uniforms.length !== rows) {
      throw new QkValueError(op, 'uniforms', `must hold one value per row (${rows}).`);
    }
    const needed = b.sampleWorkspaceBytes(rows, vocab);
    if (workspace !== undefined) checkWorkspace(op, workspace, needed);
    const u = Tensor.empty([rows * 8], 'u8', 'cuda');
    const ws = workspace ?? Tensor.empty([needed], 'u8', 'cuda');
    try {
      b.copyToDevice(ptr(u), p.uniforms);
      b.sample(
        dtypeCode(logits.dtype),
        ptr(y),
        ptr(logits),
        rows,
        vocab,
        p.temperature,
        p.topK,
        p.topP,
        ptr(u),
        ptr(ws),
        ws.nbytes,
      );
    } finally {
      u.dispose();
      if (ws !== workspace) ws.dispose();
    }
  });
  if (p.checkIds) {
    const ids = y.toArray();
    const bad = ids.indexOf(-1);
    if (bad >= 0) {
      throw new QkValueError(
        op,
        'logits',
        `row ${bad} holds NaN or +Infinity, or is entirely -Infinity; logits must be finite or -Infinity (masked), with at least one finite value per row.`,
      );
    }
  }
  return y;
}
