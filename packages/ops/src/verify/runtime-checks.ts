/**
 * Runtime checks that `qk verify` runs beside the kernel cases: out-of-memory recovery, CUDA graph replay,
 * the caching allocator's steady state, dispose, and timing events. Each is a pass/fail row with a note.
 */
import { CudaEvent, CudaGraph, cudaMemoryStats, cudaSynchronize } from '../backend/runtime.js';
import { QkDisposedError, QkOutOfMemoryError } from '../errors.js';
import { rmsnorm } from '../ops/rmsnorm.js';
import { Tensor } from '../tensor.js';
import { closeness } from '../testing/assert-close.js';

export interface RuntimeCheck {
  name: string;
  /** Throws or returns a failure note; returns `true`/a pass note when the check holds. */
  run(seed: number): { pass: boolean; note: string };
}

const close = (a: Tensor, b: Tensor) =>
  closeness(a, b).relL2 < 1e-2 && closeness(a, b).nonFiniteMismatches.length === 0;

export const RUNTIME_CHECKS: readonly RuntimeCheck[] = [
  {
    name: 'out of memory is a typed error and the process keeps working',
    run(seed) {
      let caught: unknown;
      try {
        Tensor.empty([2 ** 44], 'u8', 'cuda').dispose(); // 16 TiB
      } catch (e) {
        caught = e;
      }
      if (!(caught instanceof QkOutOfMemoryError))
        return { pass: false, note: `expected QkOutOfMemoryError, got ${String(caught)}` };
      if (caught.requestedBytes < 2 ** 44 || caught.freeBytes <= 0)
        return { pass: false, note: `bad sizes in ${caught.message}` };
      const x = Tensor.randn([4, 256], { dtype: 'bf16', seed });
      const w = Tensor.randn([256], { dtype: 'bf16', seed: seed + 1 });
      const gx = x.to('cuda');
      const gw = w.to('cuda');
      const ok = close(rmsnorm(gx, gw).to('cpu'), rmsnorm(x, w));
      gx.dispose();
      gw.dispose();
      return {
        pass: ok,
        note: ok ? `"${caught.message}" then rmsnorm ran correctly` : 'rmsnorm after OOM was wrong',
      };
    },
  },
  {
    name: 'CUDA graph replay recomputes with new inputs',
    run(seed) {
      const x = Tensor.randn([8, 1024], { dtype: 'bf16', seed }).to('cuda');
      const w = Tensor.randn([1024], { dtype: 'bf16', seed: seed + 1 }).to('cuda');
      const out = Tensor.empty([8, 1024], 'bf16', 'cuda');
      rmsnorm(x, w, { out }); // warm the kernel before capture
      const graph = CudaGraph.capture(() => void rmsnorm(x, w, { out }));
      const fresh = Tensor.randn([8, 1024], { dtype: 'bf16', seed: seed + 2 });
      x.copyFrom(fresh);
      graph.replay();
      cudaSynchronize();
      const ok = close(out.to('cpu'), rmsnorm(fresh, w.to('cpu')));
      graph.dispose();
      for (const t of [x, w, out]) t.dispose();
      return {
        pass: ok,
        note: ok ? 'replayed graph read the updated input' : 'replay output differs from the reference',
      };
    },
  },
  {
    name: 'steady-state op loop never calls cudaMalloc',
    run(seed) {
      const x = Tensor.randn([16, 2048], { dtype: 'bf16', seed }).to('cuda');
      const w = Tensor.randn([2048], { dtype: 'bf16', seed: seed + 1 }).to('cuda');
      rmsnorm(x, w).dispose();
      const before = cudaMemoryStats();
      for (let i = 0; i < 200; i++) rmsnorm(x, w).dispose();
      const after = cudaMemoryStats();
      x.dispose();
      w.dispose();
      const pass =
        after.cudaMallocCalls === before.cudaMallocCalls && after.cacheHits >= before.cacheHits + 200;
      return {
        pass,
        note: `cudaMalloc calls ${before.cudaMallocCalls} → ${after.cudaMallocCalls}, cache hits +${after.cacheHits - before.cacheHits}`,
      };
    },
  },
  {
    name: 'dispose returns memory and disposed tensors refuse use',
    run() {
      const before = cudaMemoryStats().allocatedBytes;
      const t = Tensor.empty([1 << 20], 'f32', 'cuda');
      const matrix = t.reshape([1024, 1024]);
      const view = matrix.slice(3, 9);
      t.dispose();
      matrix.dispose();
      const whileView = cudaMemoryStats().allocatedBytes;
      view.dispose();
      const after = cudaMemoryStats().allocatedBytes;
      let refused = false;
      try {
        t.toArray();
      } catch (e) {
        refused = e instanceof QkDisposedError;
      }
      const pass = whileView > before && after === before && refused;
      return {
        pass,
        note: `allocated ${before} → ${whileView} (view alive) → ${after}; use after dispose ${refused ? 'refused' : 'ALLOWED'}`,
      };
    },
  },
  {
    name: 'timing events measure GPU work',
    run(seed) {
      const x = Tensor.randn([64, 4096], { dtype: 'bf16', seed }).to('cuda');
      const w = Tensor.randn([4096], { dtype: 'bf16', seed: seed + 1 }).to('cuda');
      const start = new CudaEvent().record();
      for (let i = 0; i < 20; i++) rmsnorm(x, w).dispose();
      const end = new CudaEvent().record();
      const ms = CudaEvent.elapsedMs(start, end);
      start.dispose();
      end.dispose();
      x.dispose();
      w.dispose();
      return { pass: ms > 0 && ms < 1000, note: `${ms.toFixed(3)} ms for 20 launches` };
    },
  },
];
