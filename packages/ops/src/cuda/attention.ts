/**
 * CUDA paths of attention (kernels: packages/cuda-core/csrc/kernels/attention_decode.cu, attention_prefill.cu).
 *
 * One query token (`qLen` 1) takes the split-KV decode kernel, which needs float32 scratch: by default a CUDA u8
 * tensor of `attentionDecodeWorkspaceBytes` is allocated per call and disposed as soon as the launch is queued
 * (the caching allocator hands that block only to later work on the same stream, which runs after it). CUDA-graph
 * users must pass their own persistent `workspace` instead, sized for the longest context they capture (the size is
 * non-decreasing in the context length). Longer query blocks take the flash-style prefill kernel (no scratch).
 * A leading batch axis runs the kernels once per batch element on views of the same buffers.
 */
import { checkWorkspace } from '../check.js';
import { DTYPES, type FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';
import { Tensor } from '../tensor.js';
import { cudaOutput, dtypeCode, launch, ptr } from './common.js';

/** Largest head dimension the CUDA attention kernels accept. */
export const CUDA_ATTENTION_MAX_HEAD_DIM = 256;

/** The sizes `attention` validated, handed to the CUDA path. */
export interface CudaAttentionParams {
  batch: number;
  qLen: number;
  kvLen: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  positionOffset: number;
  causal: boolean;
  scale: number;
}

export function cudaAttention<D extends FloatDType>(
  q: Tensor<D>,
  k: Tensor<D>,
  v: Tensor<D>,
  p: CudaAttentionParams,
  out?: Tensor,
  workspace?: Tensor,
  kvLength?: Tensor<'i32'>,
): Tensor<D> {
  const op = 'attention';
  const y = cudaOutput(op, out, q.shape, q.dtype);
  if (q.size === 0) return y;
  if (p.headDim > CUDA_ATTENTION_MAX_HEAD_DIM) {
    throw new QkValueError(
      op,
      'q',
      `has head dimension ${p.headDim}; the CUDA kernels support up to ${CUDA_ATTENTION_MAX_HEAD_DIM} (use the CPU).`,
    );
  }
  const bytes = DTYPES[q.dtype].bytes;
  const qStride = BigInt(p.qLen * p.qHeads * p.headDim * bytes);
  const kvStride = BigInt(p.kvLen * p.kvHeads * p.headDim * bytes);
  const code = dtypeCode(q.dtype);
  const [yp, qp, kp, vp] = [ptr(y), ptr(q), ptr(k), ptr(v)];
  if (p.qLen === 1) {
    // The query at position positionOffset sees keys 0..positionOffset (causal), or all of them.
    // With a run-time key count (kvLength), kvLen is the capacity the workspace is sized for.
    const visible = p.causal ? p.positionOffset + 1 : p.kvLen;
    const lengthPtr = kvLength === undefined ? 0n : ptr(kvLength);
    launch(op, (b) => {
      const needed = b.attentionDecodeWorkspaceBytes(p.qHeads, p.headDim, visible);
      const ws = workspace ?? Tensor.empty([needed], 'u8', 'cuda');
      try {
        if (workspace !== undefined) checkWorkspace(op, workspace, needed);
        for (let i = 0; i < p.batch; i++) {
          const at = BigInt(i);
          b.attentionDecode(
            code,
            yp + at * qStride,
            qp + at * qStride,
            kp + at * kvStride,
            vp + at * kvStride,
            visible,
            p.qHeads,
            p.kvHeads,
            p.headDim,
            p.scale,
            ptr(ws),
            ws.nbytes,
            lengthPtr,
          );
        }
      } finally {
        if (ws !== workspace) ws.dispose();
      }
    });
    return y;
  }
  launch(op, (b) => {
    for (let i = 0; i < p.batch; i++) {
      const at = BigInt(i);
      b.attentionPrefill(
        code,
        yp + at * qStride,
        qp + at * qStride,
        kp + at * kvStride,
        vp + at * kvStride,
        p.qLen,
        p.kvLen,
        p.qHeads,
        p.kvHeads,
        p.headDim,
        p.causal ? p.positionOffset : 0,
        p.causal,
        p.scale,
      );
    }
  });
  return y;
}

/** Bytes of decode-attention scratch for `qHeads` heads of `headDim` over up to `maxKeys` keys. */
export function cudaAttentionWorkspaceBytes(qHeads: number, headDim: number, maxKeys: number): number {
  return launch('attentionWorkspace', (b) => b.attentionDecodeWorkspaceBytes(qHeads, headDim, maxKeys));
}
