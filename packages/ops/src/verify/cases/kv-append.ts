/**
 * Verify cases of qkNormRopeAppend: QK-norm + RoPE of the query and key heads of a fused qkv projection, and the
 * append of keys and values to a KV cache, over the odd head widths, the Qwen3 head layouts, and the edges of the
 * fused kernel (its widest heads, the separate ops above them).
 */
import type { FloatDType } from '../../dtype.js';
import { qkNormRopeAppend } from '../../ops/rope.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { distinctRows } from './elementwise.js';
import { dims, ODD_WIDTHS, QWEN3_SHAPES, VERIFY_DTYPES } from './shapes.js';

type Tag = VerifyCase['tag'];
type F = Tensor<FloatDType>;

const EPS = 1e-6;

interface AppendShape {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  /** Rows of the KV cache. */
  rows: number;
  /** Positions as an i32 CUDA tensor (true) or uploaded from a host array (false). */
  devicePositions: boolean;
  /** qkv as `[tokens, heads·headDim]` (true) or `[tokens, heads, headDim]` (false). */
  flat?: boolean;
}

/** The rows of `a` and `b` (`[rows, ...]`) that differ in some byte, among those `where` selects. */
function rowsWithOtherBits(a: Tensor, b: Tensor, where: (row: number) => boolean): number[] {
  const rowBytes = a.nbytes / a.shape[0]!;
  const x = new Uint8Array(a.data.buffer, a.data.byteOffset, a.nbytes);
  const y = new Uint8Array(b.data.buffer, b.data.byteOffset, b.nbytes);
  const differ: number[] = [];
  for (let r = 0; r < a.shape[0]!; r++) {
    if (!where(r)) continue;
    for (let i = r * rowBytes; i < (r + 1) * rowBytes; i++) {
      if (x[i] !== y[i]) {
        differ.push(r);
        break;
      }
    }
  }
  return differ;
}

/**
 * QK-norm + RoPE + KV-cache append from a fused qkv projection. The caches start poisoned with NaN: a row the op
 * should write and did not stays NaN (a NaN mismatch), and the rows it must leave alone, like every value row, are
 * compared bit for bit.
 */
function qkNormRopeAppendCase(dtype: FloatDType, s: AppendShape, tag: Tag): VerifyCase {
  const heads = s.qHeads + 2 * s.kvHeads;
  const qkvShape = s.flat ? [s.tokens, heads * s.headDim] : [s.tokens, heads, s.headDim];
  const label = `${dims(...qkvShape)} q${s.qHeads} kv${s.kvHeads} into ${dims(s.rows, s.kvHeads, s.headDim)}${s.devicePositions ? ' pos:cuda' : ' pos:host'}`;
  return {
    op: 'qkNormRopeAppend',
    dtype,
    shape: label,
    tag,
    tolerance: toleranceFor('qkNormRopeAppend', dtype),
    make(seed) {
      const qkv = Tensor.randn(qkvShape, { dtype, seed });
      const qWeight = Tensor.randn([s.headDim], { dtype, seed: seed + 1 });
      const kWeight = Tensor.randn([s.headDim], { dtype, seed: seed + 2 });
      const kCache = Tensor.full([s.rows, s.kvHeads, s.headDim], Number.NaN, dtype);
      const vCache = kCache.clone();
      const positions = distinctRows(s.rows, s.tokens, seed + 3);
      const options = { qHeads: s.qHeads, kvHeads: s.kvHeads, eps: EPS };
      const [kRef, vRef] = [kCache.clone(), vCache.clone()];
      const q = qkNormRopeAppend(qkv, qWeight, kWeight, {
        ...options,
        positions,
        kCache: kRef,
        vCache: vRef,
      });
      const written = new Set(positions);
      const pos = Tensor.fromStorage(positions, [s.tokens], 'i32');
      return {
        inputs: [qkv, qWeight, kWeight, kCache, vCache, ...(s.devicePositions ? [pos] : [])],
        expected: [q, kRef, vRef],
        run: ([gqkv, gq, gk, gkCache, gvCache, gpos], [out, kOut, vOut]) => {
          const at = s.devicePositions ? (gpos as Tensor<'i32'>) : positions;
          qkNormRopeAppend(gqkv as F, gq as F, gk as F, {
            ...options,
            positions: at,
            kCache: gkCache as F,
            vCache: gvCache as F,
            out,
          });
          kOut!.copyFrom(gkCache!);
          vOut!.copyFrom(gvCache!);
        },
        checkBits: ([, kGot, vGot], [, kWant, vWant]) => {
          const stray = rowsWithOtherBits(kGot!, kWant!, (r) => !written.has(r));
          const values = rowsWithOtherBits(vGot!, vWant!, () => true);
          const notes = [
            stray.length
              ? `kCache rows ${stray.slice(0, 8).join(', ')} changed but no position names them`
              : '',
            values.length ? `vCache rows ${values.slice(0, 8).join(', ')} differ from a bit-exact copy` : '',
          ];
          return notes.filter(Boolean).join('; ') || undefined;
        },
      };
    },
  };
}

function casesFor(dtype: FloatDType): VerifyCase[] {
  // Head widths of odd pair counts (2 · 4097 = 8194 runs the separate ops), flat and split qkv.
  const odd = ODD_WIDTHS.flatMap((n, i) => [
    qkNormRopeAppendCase(
      dtype,
      { tokens: 3, qHeads: 3, kvHeads: 1 + (i % 2), headDim: 2 * n, rows: 97, devicePositions: i % 2 === 0 },
      'odd',
    ),
    qkNormRopeAppendCase(
      dtype,
      { tokens: 5, qHeads: 2, kvHeads: 2, headDim: 2 * n, rows: 7, devicePositions: i % 2 === 1, flat: true },
      'odd',
    ),
  ]);
  // Decode (one token) and a short prefill at the real head layouts, positions from the host and the device.
  const qwen = QWEN3_SHAPES.flatMap((s) =>
    [1, 17].flatMap((tokens) =>
      [true, false].map((devicePositions) =>
        qkNormRopeAppendCase(
          dtype,
          { tokens, qHeads: s.heads, kvHeads: s.kvHeads, headDim: s.headDim, rows: 4096, devicePositions },
          s.tag,
        ),
      ),
    ),
  );
  const edge = [
    // The fused kernel's widest heads and the separate ops just above; one KV head filling the whole cache; a prefill.
    ...[256, 258].map((headDim) =>
      qkNormRopeAppendCase(
        dtype,
        { tokens: 3, qHeads: 4, kvHeads: 2, headDim, rows: 33, devicePositions: true, flat: true },
        'edge',
      ),
    ),
    qkNormRopeAppendCase(
      dtype,
      { tokens: 9, qHeads: 7, kvHeads: 1, headDim: 64, rows: 9, devicePositions: false },
      'edge',
    ),
    qkNormRopeAppendCase(
      dtype,
      { tokens: 512, qHeads: 16, kvHeads: 8, headDim: 128, rows: 2048, devicePositions: true, flat: true },
      'edge',
    ),
  ];
  return [...odd, ...qwen, ...edge];
}

export const KV_APPEND_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap(casesFor);
