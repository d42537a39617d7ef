/**
 * The gate/up projection with SwiGLU in the Hopper GEMM's epilogue (linearSwiglu above 32 rows) at sizes too large
 * for `qk verify`'s JavaScript reference: each shape below makes the launcher pick a different tile (128 × 256
 * cooperative, 128 × 128 cooperative, 128 × 128 and 128 × 64 ping-pong), including the Qwen3-8B MLP at 2,048 rows.
 * Checked two ways: every element against the unfused ops on the device (`linear`, then `swigluFused`, which round
 * gate and up to bf16 in between), and 512 random elements against a float64 dot product on the host. The output
 * is poisoned with NaN first, so an element no tile writes fails.
 */
import * as cudaCore from '@qk/cuda-core';
import {
  cudaAvailable,
  cudaDeviceInfo,
  linear,
  linearSwiglu,
  Rng,
  swigluFused,
  Tensor,
  useCudaBackend,
} from '@qk/ops';
import { describe, expect, it } from 'vitest';

useCudaBackend(cudaCore);
const hopper = cudaAvailable() && cudaDeviceInfo().computeCapability.major === 9;

const SHAPES = [
  { m: 2048, k: 4096, n: 12288, tile: '128 × 256 cooperative (Qwen3-8B gate/up)' },
  { m: 256, k: 4096, n: 4096, tile: '128 × 128 cooperative' },
  { m: 200, k: 1024, n: 3072, tile: '128 × 128 ping-pong (Qwen3-0.6B gate/up)' },
  { m: 33, k: 1024, n: 96, tile: '128 × 64 ping-pong' },
  { m: 777, k: 2056, n: 1001, tile: 'row, column and K tails' },
] as const;

describe('SwiGLU in the Hopper GEMM epilogue at large shapes', () => {
  it.skipIf(!hopper).each(SHAPES)('M=$m K=$k N=$n: $tile', ({ m, k, n }) => {
    const seed = m * 7 + k + n;
    const x = Tensor.rand([m, k], { dtype: 'bf16', seed, low: -1, high: 1 });
    const scale = 1 / Math.sqrt(k);
    const w = Tensor.rand([2 * n, k], {
      dtype: 'bf16',
      seed: seed + 1,
      low: -scale * 1.7,
      high: scale * 1.7,
    });
    const [gx, gw] = [x.to('cuda'), w.to('cuda')];
    const out = Tensor.full([m, n], Number.NaN, 'bf16').to('cuda');
    const both = linear(gx, gw);
    const unfused = swigluFused(both);
    try {
      linearSwiglu(gx, gw, { out });
      const got = out.to('cpu').toFloat32Array();
      const want = unfused.to('cpu').toFloat32Array();
      let worst = 0;
      for (let i = 0; i < got.length; i++) {
        const d = Math.abs(got[i]! - want[i]!) / (0.02 + Math.abs(want[i]!));
        if (!(d <= worst)) worst = Number.isNaN(d) ? Number.POSITIVE_INFINITY : d;
      }
      expect(worst, 'largest |fused − unfused| / (0.02 + |unfused|)').toBeLessThan(0.05);
      // float64 oracle on sampled elements.
      const row = (t: Tensor, i: number) => t.slice(i, i + 1).toFloat32Array();
      const rng = new Rng(seed + 2);
      for (let s = 0; s < 512; s++) {
        const r = s < 4 ? m - 1 - s : rng.nextInt(m);
        const j = s < 4 ? n - 1 - s : rng.nextInt(n);
        const [xr, gate, up] = [row(x, r), row(w, j), row(w, n + j)];
        let g = 0;
        let u = 0;
        for (let t = 0; t < k; t++) {
          g += xr[t]! * gate[t]!;
          u += xr[t]! * up[t]!;
        }
        const y = (g / (1 + Math.exp(-g))) * u;
        const v = got[r * n + j]!;
        expect(Math.abs(v - y), `element [${r}, ${j}]: ${v} vs ${y}`).toBeLessThanOrEqual(
          0.01 + 0.01 * Math.abs(y),
        );
      }
    } finally {
      for (const t of [gx, gw, out, both, unfused]) t.dispose();
    }
  });
});
