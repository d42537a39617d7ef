// Consumer-only microbenchmark: a block of 7 consumer warps (+1 idle) runs the GEMV over tiles already in shared memory.
// v9: round-robin row pairs per warp, FMA dot + warp_sum. mma: tensor-core parts per warp, barrier, partial sums.
#include <cstdio>
#include <cstdint>
#include <cuda_bf16.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)
using bf16 = __nv_bfloat16;
constexpr int W = 7, C = W * 32;
__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint4 lds128(const void* p) { uint4 v; asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(smem_addr(p))); return v; }
__device__ __forceinline__ void csync() { asm volatile("bar.sync 1, %0;" ::"n"(C) : "memory"); }
__device__ __forceinline__ float dot8(const uint4 w, const uint4 x, float acc) {
  const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w); const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; i++) { const float2 fa = __bfloat1622float2(a[i]), fb = __bfloat1622float2(b[i]); acc = fmaf(fa.x, fb.x, acc); acc = fmaf(fa.y, fb.y, acc); }
  return acc;
}
__device__ __forceinline__ float wsum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ void mma_16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float2 mma_rows(const bf16* lo, const bf16* hi, const bf16* x, int k, int kb0, int kb1) {
  const int lane = threadIdx.x & 31, t = lane & 3, odd = (lane >> 2) & 1;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kb = kb0; kb < kb1; kb++) {
    const int cx = kb * 64 + 8 * t, cy = cx + 32;
    const int c_first = odd ? cy : cx, c_second = odd ? cx : cy;
    const uint4 xa = cx < k ? lds128(x + cx) : zero, xb = cy < k ? lds128(x + cy) : zero;
    const uint4 l1 = lo != nullptr && c_first < k ? lds128(lo + c_first) : zero;
    const uint4 h1 = hi != nullptr && c_first < k ? lds128(hi + c_first) : zero;
    const uint4 l2 = lo != nullptr && c_second < k ? lds128(lo + c_second) : zero;
    const uint4 h2 = hi != nullptr && c_second < k ? lds128(hi + c_second) : zero;
    const uint4 lx = odd ? l2 : l1, ly = odd ? l1 : l2, hx = odd ? h2 : h1, hy = odd ? h1 : h2;
    mma_16816(c0, lx.x, hx.x, lx.y, hx.y, xa.x, xa.y);
    mma_16816(c1, lx.z, hx.z, lx.w, hx.w, xa.z, xa.w);
    mma_16816(c0, ly.x, hy.x, ly.y, hy.y, xb.x, xb.y);
    mma_16816(c1, ly.z, hy.z, ly.w, hy.w, xb.z, xb.w);
  }
  return make_float2(c0[0] + c1[0], c0[2] + c1[2]);
}

/** A warp's dots of MMA rows g and g + 8 over all k columns, 4 accumulator chains. */
__device__ __forceinline__ float2 mma_whole(const bf16* lo, const bf16* hi, const bf16* x, int k) {
  const int lane = threadIdx.x & 31, t = lane & 3, odd = (lane >> 2) & 1;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c[4][4] = {};
#pragma unroll 2
  for (int kb = 0; kb < (k + 63) / 64; kb++) {
    const int cx = kb * 64 + 8 * t, cy = cx + 32;
    const int c_first = odd ? cy : cx, c_second = odd ? cx : cy;
    const uint4 xa = cx < k ? lds128(x + cx) : zero, xb = cy < k ? lds128(x + cy) : zero;
    const uint4 l1 = lo != nullptr && c_first < k ? lds128(lo + c_first) : zero;
    const uint4 h1 = hi != nullptr && c_first < k ? lds128(hi + c_first) : zero;
    const uint4 l2 = lo != nullptr && c_second < k ? lds128(lo + c_second) : zero;
    const uint4 h2 = hi != nullptr && c_second < k ? lds128(hi + c_second) : zero;
    const uint4 lx = odd ? l2 : l1, ly = odd ? l1 : l2, hx = odd ? h2 : h1, hy = odd ? h1 : h2;
    mma_16816(c[0], lx.x, hx.x, lx.y, hx.y, xa.x, xa.y);
    mma_16816(c[1], lx.z, hx.z, lx.w, hx.w, xa.z, xa.w);
    mma_16816(c[2], ly.x, hy.x, ly.y, hy.y, xb.x, xb.y);
    mma_16816(c[3], ly.z, hy.z, ly.w, hy.w, xb.z, xb.w);
  }
  return make_float2((c[0][0] + c[1][0]) + (c[2][0] + c[3][0]), (c[0][2] + c[1][2]) + (c[2][2] + c[3][2]));
}

// mode 0: v9 pairs; 1: mma + sync + sums; 2: mma only (no sync, no sums); 3: sync only; 4: v9 without the dot
template <int kMode>
__global__ void __launch_bounds__(256, 1) tiles(int k, int n, int ntiles, int reps, float* out, long long* cyc) {
  extern __shared__ __align__(128) uint8_t smem[];
  bf16* x = reinterpret_cast<bf16*>(smem);
  bf16* slots = x + 4096;
  float* part = reinterpret_cast<float*>(slots + (size_t)ntiles * n * k);
  for (int i = threadIdx.x; i < 4096 + ntiles * n * k; i += blockDim.x) x[i] = __float2bfloat16(0.001f * ((i * 37) % 101));
  __syncthreads();
  if (threadIdx.x >= C) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float sink = 0.f;
  unsigned pairs = 0, tick = 0;
  long long t0 = clock64();
  for (int rep = 0; rep < reps; rep++) {
    for (int ti = 0; ti < ntiles; ti++, tick++) {
      const bf16* tile = slots + (size_t)ti * n * k;
      if (kMode == 7) {  // whole tiles per warp
        if (static_cast<int>(tick % W) == warp) {
          const int g = lane >> 2;
          for (int blk = 0; blk * 16 < n; blk++) {
            const int lo = blk * 16 + g < n ? blk * 16 + g : -1, hi = blk * 16 + g + 8 < n ? blk * 16 + g + 8 : -1;
            const float2 v = mma_whole(lo < 0 ? nullptr : tile + (size_t)lo * k, hi < 0 ? nullptr : tile + (size_t)hi * k, x, k);
            if ((lane & 3) == 0) sink += v.x + v.y;
          }
        }
      } else if (kMode == 5 || kMode == 6) {
        const int first = (warp + W - static_cast<int>(pairs % W)) % W;
        pairs += (n + 1) / 2;
        for (int r = 2 * first; r < n; r += 2 * W) {
          const bf16* row = tile + (size_t)r * k;
          float a[4] = {0.f, 0.f, 0.f, 0.f}, b[4] = {0.f, 0.f, 0.f, 0.f};
          int c = lane * 8, i = 0;
#pragma unroll 4
          for (; c < k; c += 256, i++) { const uint4 xv = lds128(x + c); a[i & 3] = dot8(lds128(row + c), xv, a[i & 3]); b[i & 3] = dot8(lds128(row + k + c), xv, b[i & 3]); }
          float a0 = (a[0] + a[1]) + (a[2] + a[3]), a1 = (b[0] + b[1]) + (b[2] + b[3]);
          if (kMode == 5) { a0 = wsum(a0); a1 = wsum(a1); if (lane == 0) sink += a0 + a1; }
          else {
            const bool hi = (lane & 16) != 0;
            float v = hi ? a1 : a0;
            v += __shfl_xor_sync(0xffffffffu, hi ? a0 : a1, 16);
            for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 || lane == 16) sink += v;
          }
        }
      } else if (kMode == 0 || kMode == 4) {
        const int first = (warp + W - static_cast<int>(pairs % W)) % W;
        pairs += (n + 1) / 2;
        for (int r = 2 * first; r < n; r += 2 * W) {
          const bf16* row = tile + (size_t)r * k;
          float a0 = 0.f, a1 = 0.f;
          if (kMode == 0) {
#pragma unroll 4
            for (int c = lane * 8; c < k; c += 256) { const uint4 xv = lds128(x + c); a0 = dot8(lds128(row + c), xv, a0); a1 = dot8(lds128(row + k + c), xv, a1); }
          }
          a0 = wsum(a0); a1 = wsum(a1);
          if (lane == 0) sink += a0 + a1;
        }
      } else {
        const int blocks = (n + 15) / 16, steps = (k + 63) / 64, chunks = max(1, min(W / blocks, steps));
        float* p = part + (tick & 1) * (W * 16);
        if (kMode != 3 && warp < blocks * chunks) {
          const int blk = warp / chunks, ch = warp % chunks, g = lane >> 2;
          const int lo = blk * 16 + g < n ? blk * 16 + g : -1, hi = blk * 16 + g + 8 < n ? blk * 16 + g + 8 : -1;
          const float2 v = mma_rows(lo < 0 ? nullptr : tile + (size_t)lo * k, hi < 0 ? nullptr : tile + (size_t)hi * k, x, k, steps * ch / chunks, steps * (ch + 1) / chunks);
          if ((lane & 3) == 0) { p[warp * 16 + g] = v.x; p[warp * 16 + g + 8] = v.y; }
        }
        if (kMode != 2) csync();
        if (kMode == 1) {
          const int first = (warp + W - static_cast<int>(pairs % W)) % W;
          pairs += (n + 1) / 2;
          for (int r = 2 * first; r < n; r += 2 * W) {
            float v = 0.f;
            for (int q = 0; q < 2 && r + q < n; q++) {
              const int blk = (r + q) / 16, m = (r + q) % 16;
              for (int c = 0; c < chunks; c++) v += p[(blk * chunks + c) * 16 + m];
            }
            if (lane == 0) sink += v;
          }
        }
      }
    }
  }
  long long t1 = clock64();
  if (lane == 0) out[blockIdx.x * W + warp] = sink;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

template <int kMode>
int run(const char* name, int k, int n, int ntiles, float* out, long long* cyc) {
  const int reps = 200;
  const size_t smem = 8192 + (size_t)ntiles * n * k * 2 + 2 * W * 16 * 4;
  CK(cudaFuncSetAttribute(tiles<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  tiles<kMode><<<132, 256, smem>>>(k, n, ntiles, reps, out, cyc);
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  tiles<kMode><<<132, 256, smem>>>(k, n, ntiles, reps, out, cyc);
  cudaEventRecord(b); CK(cudaEventSynchronize(b));
  float ms; cudaEventElapsedTime(&ms, a, b);
  long long h[132]; CK(cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost));
  printf("%-10s k=%5d rows/tile=%3d: %.3f us per tile (%lld cycles per tile, block 0)\n", name, k, n, ms * 1000.0 / (reps * ntiles), h[0] / (reps * ntiles));
  return 0;
}

int main() {
  float* out; long long* cyc; CK(cudaMalloc(&out, 132 * W * 4)); CK(cudaMalloc(&cyc, 132 * 8));
  struct S { int k, n, t; } shapes[] = {{1024, 10, 8}, {1024, 16, 5}, {1024, 16, 1}, {2048, 8, 7}, {2048, 8, 1}, {3072, 4, 4}, {3072, 4, 1}, {3072, 8, 1}};
  for (auto s : shapes) {
    run<0>("v9", s.k, s.n, s.t, out, cyc);
    run<7>("mma-whole", s.k, s.n, s.t, out, cyc);
    run<4>("v9-nodot", s.k, s.n, s.t, out, cyc);

  }
  return 0;
}
