// Device probe (v28): what one block's attention over n keys costs when its keys and values already sit in shared
// memory, for a query group of 2 (Qwen3-0.6B), on the CUDA cores (the megakernel's pass: 8 keys per warp, 56 per pass)
// and on the tensor cores (mma.sync m16n8k16: scores K·qᵀ with the keys as rows, then Vᵀ·Pᵀ with each warp owning 16 of
// the 128 dimensions); and what the merge of a head's two chunks costs through distributed shared memory (a cluster
// of 2) against flagged words in global memory (the megakernel's way).
//
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -o attn attn.cu     Run: ./attn
// Each timed part is bracketed by block barriers and stamped with clock64 by thread 0; the table gives µs at the SM
// clock measured against %globaltimer in the same launch. The outputs are checked against a double-precision reference.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));        \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

using bf16 = __nv_bfloat16;
constexpr int W = 7, C = W * 32;  // consumer warps, threads (the megakernel's)
constexpr int D = 128, G = 2, KV = 8;
constexpr int SK = D + 8;       // shared-memory row of a key or value, in bf16: 272 bytes (ldmatrix rows on other banks)
constexpr int kMaxKeys = 384;   // per block
constexpr int kRec = G * D + 2 * G;  // a chunk's record: unnormalised output, then (max, sum) per head
constexpr float kLog2e = 1.4426950408889634f;

struct Smem {
  bf16 k[kMaxKeys * SK];
  bf16 v[kMaxKeys * SK];
  float s[G * kMaxKeys];      // scores, log2 domain
  float qs[G * D];            // fma mode: roped queries, pre-scaled
  bf16 qh[G * D];             // mma modes: roped queries, bf16, unscaled
  float wacc[W * G * D];      // fma mode: the warps' outputs
  float wml[W * G * 2];       // fma mode: the warps' (max, sum); mma mode: the warps' max
  uint32_t pw[kMaxKeys / 16][G][8];  // mma3: the bf16 weights of key pairs, [tile][head][pair]
  float wl[W * G];            // mma3: the warps' sums
  float rec[kRec];            // this block's record
  float peer[kRec];           // the other chunk's record (merge)
  alignas(8) uint64_t bar;    // DSMEM merge: the peer's record has landed
  alignas(8) uint64_t sbar;   // bulk staging: the chunk's rows have landed
  long long mark[W][4];       // per warp: clock64 at points inside the attention (lane 0)
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void csync() { asm volatile("bar.sync 1, %0;" ::"n"(C) : "memory"); }
__device__ __forceinline__ uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ unsigned mapa(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
__device__ __forceinline__ float bf2_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf2_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}
__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/** The megakernel's pass on the CUDA cores, its rows read from shared memory: 8 keys per warp, passes of 56 keys. */
#define MARK(i) do { if (lane == 0) sm.mark[warp][i] = clock64(); } while (0)
__device__ void attend_fma(Smem& sm, int n) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, qd = lane & 3, kq = lane >> 2;
  MARK(0);
  float m[G], l[G], acc[G][4];
  for (int h = 0; h < G; h++) {
    m[h] = -INFINITY;
    l[h] = 0.f;
    for (int e = 0; e < 4; e++) acc[h][e] = 0.f;
  }
  for (int sp = 0; sp < n; sp += W * 8) {
    const int base = sp + warp * 8;
    if (base >= n) break;
    const int kk = base + kq;
    const bool has_key = kk < n;
    uint4 kv[4];
    uint2 vv[8];
    if (has_key) {
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = *reinterpret_cast<const uint4*>(sm.k + kk * SK + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (base + j < n) vv[j] = *reinterpret_cast<const uint2*>(sm.v + (base + j) * SK + lane * 4);
    float s[G] = {0.f, 0.f};
    if (has_key) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const unsigned* w = reinterpret_cast<const unsigned*>(&kv[i]);
        const int at = (qd + 4 * i) * 8;
#pragma unroll
        for (int h = 0; h < G; h++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            s[h] = fmaf(sm.qs[h * D + at + 2 * e], bf2_lo(w[e]), s[h]);
            s[h] = fmaf(sm.qs[h * D + at + 2 * e + 1], bf2_hi(w[e]), s[h]);
          }
      }
    }
#pragma unroll
    for (int h = 0; h < G; h++) {
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 1);
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 2);
      float mx = has_key ? s[h] : -INFINITY;
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float mn = fmaxf(m[h], mx);
      const float alpha = exp2f(m[h] - mn);
      m[h] = mn;
      const float p = has_key ? exp2f(s[h] - mn) : 0.f;
      float ps = p;
      ps += __shfl_xor_sync(0xffffffffu, ps, 4);
      ps += __shfl_xor_sync(0xffffffffu, ps, 8);
      ps += __shfl_xor_sync(0xffffffffu, ps, 16);
      l[h] = l[h] * alpha + ps;
#pragma unroll
      for (int e = 0; e < 4; e++) acc[h][e] *= alpha;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float pj = __shfl_sync(0xffffffffu, p, j * 4);
        if (base + j < n) {
          acc[h][0] = fmaf(pj, bf2_lo(vv[j].x), acc[h][0]);
          acc[h][1] = fmaf(pj, bf2_hi(vv[j].x), acc[h][1]);
          acc[h][2] = fmaf(pj, bf2_lo(vv[j].y), acc[h][2]);
          acc[h][3] = fmaf(pj, bf2_hi(vv[j].y), acc[h][3]);
        }
      }
    }
  }
  MARK(1);
  for (int h = 0; h < G; h++) {
    *reinterpret_cast<float4*>(sm.wacc + warp * G * D + h * D + lane * 4) =
        make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    if (lane == 0) {
      sm.wml[(warp * G + h) * 2] = m[h];
      sm.wml[(warp * G + h) * 2 + 1] = l[h];
    }
  }
  csync();
  MARK(2);
  for (int o = tid; o < G * D; o += C) {
    const int oh = o / D;
    float mh = -INFINITY;
    for (int w = 0; w < W; w++) mh = fmaxf(mh, sm.wml[(w * G + oh) * 2]);
    float t = 0.f, lh = 0.f;
    for (int w = 0; w < W; w++) {
      const float mw = sm.wml[(w * G + oh) * 2];
      if (mw == -INFINITY) continue;
      const float f = exp2f(mw - mh);
      t = fmaf(f, sm.wacc[w * G * D + o], t);
      lh = fmaf(f, sm.wml[(w * G + oh) * 2 + 1], lh);
    }
    sm.rec[o] = t;
    if (o % D == 0) {
      sm.rec[G * D + 2 * oh] = mh;
      sm.rec[G * D + 2 * oh + 1] = lh;
    }
  }
  MARK(3);
}

/**
 * The same on the tensor cores. Scores: Sᵀ (16 keys × 8 columns, queries 0-1 in columns 0-1) = K (16 × 16 dims) · qᵀ,
 * the keys' tiles spread over the warps; the block's max per head; then warp w computes output dims [16w, 16w + 16)
 * (warp 0 also [112, 128)) as Vᵀ (16 dims × 16 keys, ldmatrix.trans) · Pᵀ (16 keys × 8, bf16 weights 2^(s − max)).
 * `q` holds the roped queries in bf16, unscaled.
 */
__device__ void attend_mma(Smem& sm, const bf16* q, int n) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const float scale = rsqrtf(static_cast<float>(D)) * kLog2e;
  const int tiles = (n + 15) / 16;
  MARK(0);
  // qᵀ as B: b0 = q[g][16s + 2t, +1], b1 = q[g][16s + 8 + 2t, +1] (columns g ≥ G are zero).
  unsigned qb[8][2];
#pragma unroll
  for (int s = 0; s < 8; s++) {
    qb[s][0] = g < G ? *reinterpret_cast<const unsigned*>(q + g * D + 16 * s + 2 * t) : 0u;
    qb[s][1] = g < G ? *reinterpret_cast<const unsigned*>(q + g * D + 16 * s + 8 + 2 * t) : 0u;
  }
  float wmax[G] = {-INFINITY, -INFINITY};
  const unsigned kbase = smem_addr(sm.k);
  for (int tile = warp; tile < tiles; tile += W) {
    float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned row = kbase + ((tile * 16 + (lane & 15)) * SK + (lane >> 4) * 8) * 2;
#pragma unroll
    for (int s = 0; s < 8; s += 2) {
      unsigned a0, a1, a2, a3, e0, e1, e2, e3;
      ldsm_x4(row + s * 32, a0, a1, a2, a3);
      ldsm_x4(row + (s + 1) * 32, e0, e1, e2, e3);
      mma16816(c0, a0, a1, a2, a3, qb[s][0], qb[s][1]);
      mma16816(c1, e0, e1, e2, e3, qb[s + 1][0], qb[s + 1][1]);
    }
    if (t == 0) {  // columns 0-1: heads 0-1 of keys g and g + 8
      const int k0 = tile * 16 + g, k1 = k0 + 8;
      const float s00 = k0 < n ? (c0[0] + c1[0]) * scale : -INFINITY;
      const float s01 = k0 < n ? (c0[1] + c1[1]) * scale : -INFINITY;
      const float s10 = k1 < n ? (c0[2] + c1[2]) * scale : -INFINITY;
      const float s11 = k1 < n ? (c0[3] + c1[3]) * scale : -INFINITY;
      sm.s[k0] = s00;
      sm.s[kMaxKeys + k0] = s01;
      sm.s[k1] = s10;
      sm.s[kMaxKeys + k1] = s11;
      wmax[0] = fmaxf(wmax[0], fmaxf(s00, s10));
      wmax[1] = fmaxf(wmax[1], fmaxf(s01, s11));
    }
  }
#pragma unroll
  for (int h = 0; h < G; h++) {
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 4));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 8));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 16));
    if (lane == 0) sm.wml[warp * G + h] = wmax[h];
  }
  MARK(1);
  csync();
  MARK(2);
  float mh = -INFINITY;  // this lane's head (g < G)
  if (g < G)
    for (int w = 0; w < W; w++) mh = fmaxf(mh, sm.wml[w * G + g]);
  const int mt0 = warp, mt1 = warp == 0 ? 7 : -1;
  float o0[4] = {0.f, 0.f, 0.f, 0.f}, o1[4] = {0.f, 0.f, 0.f, 0.f}, o2[4] = {0.f, 0.f, 0.f, 0.f};
  float lsum = 0.f;
  const unsigned vbase = smem_addr(sm.v);
  const int vrow = (lane & 7) + ((lane >> 4) << 3), vcol = ((lane >> 3) & 1) * 8;
  // Pᵀ as B for keys [16j, 16j + 16): b0 = P[g][16j + 2t, +1], b1 = P[g][16j + 8 + 2t, +1] (columns g ≥ G zero).
  auto weights = [&](int j, unsigned& b0, unsigned& b1) {
    b0 = 0u;
    b1 = 0u;
    if (g < G) {
      const float* sr = sm.s + g * kMaxKeys + 16 * j + 2 * t;
      const float p0 = exp2f(sr[0] - mh), p1 = exp2f(sr[1] - mh), p2 = exp2f(sr[8] - mh), p3 = exp2f(sr[9] - mh);
      lsum += (p0 + p1) + (p2 + p3);
      b0 = pack_bf2(p0, p1);
      b1 = pack_bf2(p2, p3);
    }
  };
  for (int j = 0; j < tiles; j += 2) {  // two accumulator chains: even and odd key tiles
    unsigned b0, b1, e0, e1, a0, a1, a2, a3;
    weights(j, b0, b1);
    const unsigned at = vbase + ((16 * j + vrow) * SK + vcol) * 2;
    ldsm_x4_t(at + mt0 * 32, a0, a1, a2, a3);
    mma16816(o0, a0, a1, a2, a3, b0, b1);
    if (mt1 >= 0) {
      ldsm_x4_t(at + mt1 * 32, a0, a1, a2, a3);
      mma16816(o2, a0, a1, a2, a3, b0, b1);
    }
    if (j + 1 < tiles) {
      weights(j + 1, e0, e1);
      const unsigned at1 = at + 16 * SK * 2;
      ldsm_x4_t(at1 + mt0 * 32, a0, a1, a2, a3);
      mma16816(o1, a0, a1, a2, a3, e0, e1);
      if (mt1 >= 0) {
        ldsm_x4_t(at1 + mt1 * 32, a0, a1, a2, a3);
        mma16816(o2, a0, a1, a2, a3, e0, e1);
      }
    }
  }
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
  // D: c0 = O[dim 16·mt + g][column 2t], c1 = column 2t + 1, c2/c3 = dim + 8: columns 0-1 (t = 0) are the heads.
  if (t == 0) {
    const int d0 = 16 * mt0 + g;
    sm.rec[d0] = o0[0] + o1[0];
    sm.rec[D + d0] = o0[1] + o1[1];
    sm.rec[d0 + 8] = o0[2] + o1[2];
    sm.rec[D + d0 + 8] = o0[3] + o1[3];
    if (mt1 >= 0) {
      const int d1 = 16 * mt1 + g;
      sm.rec[d1] = o2[0];
      sm.rec[D + d1] = o2[1];
      sm.rec[d1 + 8] = o2[2];
      sm.rec[D + d1 + 8] = o2[3];
    }
  }
  if (warp == 0 && t == 0 && g < G) {
    sm.rec[G * D + 2 * g] = mh;
    sm.rec[G * D + 2 * g + 1] = lsum;
  }
  MARK(3);
}

/**
 * attend_mma with the latency taken out: the queries from shared memory; two key tiles at a time in the scores (four
 * accumulator chains); the weights of four key tiles computed together (no branch: every lane computes its head g & 1,
 * and the columns g ≥ G are zeroed by a select), then four ldmatrix.trans and four MMAs into four chains.
 */
__device__ void attend_mma2(Smem& sm, int n) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const float scale = rsqrtf(static_cast<float>(D)) * kLog2e;
  const int tiles = (n + 15) / 16;
  const bool col = g < G;  // this lane's B column is a real head
  const int hr = g & (G - 1);
  MARK(0);
  unsigned qb[8][2];
#pragma unroll
  for (int s = 0; s < 8; s++) {
    const unsigned x0 = *reinterpret_cast<const unsigned*>(sm.qh + hr * D + 16 * s + 2 * t);
    const unsigned x1 = *reinterpret_cast<const unsigned*>(sm.qh + hr * D + 16 * s + 8 + 2 * t);
    qb[s][0] = col ? x0 : 0u;
    qb[s][1] = col ? x1 : 0u;
  }
  float wmax[G] = {-INFINITY, -INFINITY};
  const unsigned kbase = smem_addr(sm.k);
  for (int ta = warp; ta < tiles; ta += 2 * W) {
    const int tb = ta + W < tiles ? ta + W : ta;  // (a repeat of tile a when there is no second tile: not stored)
    float c[4][4] = {};
    const unsigned ra = kbase + ((ta * 16 + (lane & 15)) * SK + (lane >> 4) * 8) * 2;
    const unsigned rb = kbase + ((tb * 16 + (lane & 15)) * SK + (lane >> 4) * 8) * 2;
#pragma unroll
    for (int s = 0; s < 8; s += 2) {
      unsigned a[4][4];
      ldsm_x4(ra + s * 32, a[0][0], a[0][1], a[0][2], a[0][3]);
      ldsm_x4(ra + (s + 1) * 32, a[1][0], a[1][1], a[1][2], a[1][3]);
      ldsm_x4(rb + s * 32, a[2][0], a[2][1], a[2][2], a[2][3]);
      ldsm_x4(rb + (s + 1) * 32, a[3][0], a[3][1], a[3][2], a[3][3]);
      mma16816(c[0], a[0][0], a[0][1], a[0][2], a[0][3], qb[s][0], qb[s][1]);
      mma16816(c[1], a[1][0], a[1][1], a[1][2], a[1][3], qb[s + 1][0], qb[s + 1][1]);
      mma16816(c[2], a[2][0], a[2][1], a[2][2], a[2][3], qb[s][0], qb[s][1]);
      mma16816(c[3], a[3][0], a[3][1], a[3][2], a[3][3], qb[s + 1][0], qb[s + 1][1]);
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (u == 1 && tb == ta) break;
      const int tile = u == 0 ? ta : tb;
      const float* x = c[2 * u];
      const float* y = c[2 * u + 1];
      if (t == 0) {
        const int k0 = tile * 16 + g, k1 = k0 + 8;
        const float s00 = k0 < n ? (x[0] + y[0]) * scale : -INFINITY;
        const float s01 = k0 < n ? (x[1] + y[1]) * scale : -INFINITY;
        const float s10 = k1 < n ? (x[2] + y[2]) * scale : -INFINITY;
        const float s11 = k1 < n ? (x[3] + y[3]) * scale : -INFINITY;
        sm.s[k0] = s00;
        sm.s[kMaxKeys + k0] = s01;
        sm.s[k1] = s10;
        sm.s[kMaxKeys + k1] = s11;
        wmax[0] = fmaxf(wmax[0], fmaxf(s00, s10));
        wmax[1] = fmaxf(wmax[1], fmaxf(s01, s11));
      }
    }
  }
#pragma unroll
  for (int h = 0; h < G; h++) {
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 4));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 8));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 16));
    if (lane == 0) sm.wml[warp * G + h] = wmax[h];
  }
  MARK(1);
  csync();
  MARK(2);
  float mh = -INFINITY;
  for (int w = 0; w < W; w++) mh = fmaxf(mh, sm.wml[w * G + hr]);
  const bool two = warp == 0;  // warp 0 also takes m-tile 7
  float o[4][4] = {}, o7[2][4] = {};
  float lsum = 0.f;
  const unsigned vbase = smem_addr(sm.v);
  const int vrow = (lane & 7) + ((lane >> 4) << 3), vcol = ((lane >> 3) & 1) * 8;
  const float* srow = sm.s + hr * kMaxKeys + 2 * t;
  for (int j0 = 0; j0 < tiles; j0 += 4) {
    unsigned bw[4][2];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int j = min(j0 + u, tiles - 1);
      const float2 lo = *reinterpret_cast<const float2*>(srow + 16 * j);
      const float2 hi = *reinterpret_cast<const float2*>(srow + 16 * j + 8);
      const float p0 = exp2f(lo.x - mh), p1 = exp2f(lo.y - mh), p2 = exp2f(hi.x - mh), p3 = exp2f(hi.y - mh);
      const bool real = col && j0 + u < tiles;
      lsum += real ? (p0 + p1) + (p2 + p3) : 0.f;
      bw[u][0] = real ? pack_bf2(p0, p1) : 0u;
      bw[u][1] = real ? pack_bf2(p2, p3) : 0u;
    }
    unsigned a[4][4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int j = min(j0 + u, tiles - 1);
      ldsm_x4_t(vbase + ((16 * j + vrow) * SK + vcol) * 2 + warp * 32, a[u][0], a[u][1], a[u][2], a[u][3]);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) mma16816(o[u], a[u][0], a[u][1], a[u][2], a[u][3], bw[u][0], bw[u][1]);
    if (two) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int j = min(j0 + u, tiles - 1);
        ldsm_x4_t(vbase + ((16 * j + vrow) * SK + vcol) * 2 + 7 * 32, a[u][0], a[u][1], a[u][2], a[u][3]);
      }
#pragma unroll
      for (int u = 0; u < 4; u++) mma16816(o7[u & 1], a[u][0], a[u][1], a[u][2], a[u][3], bw[u][0], bw[u][1]);
    }
  }
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
  if (t == 0) {
    const int d0 = 16 * warp + g;
    sm.rec[d0] = (o[0][0] + o[1][0]) + (o[2][0] + o[3][0]);
    sm.rec[D + d0] = (o[0][1] + o[1][1]) + (o[2][1] + o[3][1]);
    sm.rec[d0 + 8] = (o[0][2] + o[1][2]) + (o[2][2] + o[3][2]);
    sm.rec[D + d0 + 8] = (o[0][3] + o[1][3]) + (o[2][3] + o[3][3]);
    if (two) {
      const int d1 = 16 * 7 + g;
      sm.rec[d1] = o7[0][0] + o7[1][0];
      sm.rec[D + d1] = o7[0][1] + o7[1][1];
      sm.rec[d1 + 8] = o7[0][2] + o7[1][2];
      sm.rec[D + d1 + 8] = o7[0][3] + o7[1][3];
    }
  }
  if (warp == 0 && t == 0 && col) {
    sm.rec[G * D + 2 * g] = mh;
    sm.rec[G * D + 2 * g + 1] = lsum;
  }
  MARK(3);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/**
 * attend_mma2 with the weights computed once per block: after the block's max, warp w turns the scores of key tiles
 * w, w + 7, … into bf16 pairs in shared memory (16 lanes: one head and one key pair each, ex2.approx), and after a
 * second barrier every warp's Vᵀ·Pᵀ reads its B fragments with two shared loads per key tile.
 */
__device__ void attend_mma3(Smem& sm, int n) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const float scale = rsqrtf(static_cast<float>(D)) * kLog2e;
  const int tiles = (n + 15) / 16;
  const bool col = g < G;
  const int hr = g & (G - 1);
  MARK(0);
  unsigned qb[8][2];
#pragma unroll
  for (int s = 0; s < 8; s++) {
    const unsigned x0 = *reinterpret_cast<const unsigned*>(sm.qh + hr * D + 16 * s + 2 * t);
    const unsigned x1 = *reinterpret_cast<const unsigned*>(sm.qh + hr * D + 16 * s + 8 + 2 * t);
    qb[s][0] = col ? x0 : 0u;
    qb[s][1] = col ? x1 : 0u;
  }
  float wmax[G] = {-INFINITY, -INFINITY};
  const unsigned kbase = smem_addr(sm.k);
  for (int ta = warp; ta < tiles; ta += 2 * W) {
    const int tb = ta + W < tiles ? ta + W : ta;
    float c[4][4] = {};
    const unsigned ra = kbase + ((ta * 16 + (lane & 15)) * SK + (lane >> 4) * 8) * 2;
    const unsigned rb = kbase + ((tb * 16 + (lane & 15)) * SK + (lane >> 4) * 8) * 2;
#pragma unroll
    for (int s = 0; s < 8; s += 2) {
      unsigned a[4][4];
      ldsm_x4(ra + s * 32, a[0][0], a[0][1], a[0][2], a[0][3]);
      ldsm_x4(ra + (s + 1) * 32, a[1][0], a[1][1], a[1][2], a[1][3]);
      ldsm_x4(rb + s * 32, a[2][0], a[2][1], a[2][2], a[2][3]);
      ldsm_x4(rb + (s + 1) * 32, a[3][0], a[3][1], a[3][2], a[3][3]);
      mma16816(c[0], a[0][0], a[0][1], a[0][2], a[0][3], qb[s][0], qb[s][1]);
      mma16816(c[1], a[1][0], a[1][1], a[1][2], a[1][3], qb[s + 1][0], qb[s + 1][1]);
      mma16816(c[2], a[2][0], a[2][1], a[2][2], a[2][3], qb[s][0], qb[s][1]);
      mma16816(c[3], a[3][0], a[3][1], a[3][2], a[3][3], qb[s + 1][0], qb[s + 1][1]);
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (u == 1 && tb == ta) break;
      const int tile = u == 0 ? ta : tb;
      const float* x = c[2 * u];
      const float* y = c[2 * u + 1];
      if (t == 0) {
        const int k0 = tile * 16 + g, k1 = k0 + 8;
        const float s00 = k0 < n ? (x[0] + y[0]) * scale : -INFINITY;
        const float s01 = k0 < n ? (x[1] + y[1]) * scale : -INFINITY;
        const float s10 = k1 < n ? (x[2] + y[2]) * scale : -INFINITY;
        const float s11 = k1 < n ? (x[3] + y[3]) * scale : -INFINITY;
        sm.s[k0] = s00;
        sm.s[kMaxKeys + k0] = s01;
        sm.s[k1] = s10;
        sm.s[kMaxKeys + k1] = s11;
        wmax[0] = fmaxf(wmax[0], fmaxf(s00, s10));
        wmax[1] = fmaxf(wmax[1], fmaxf(s01, s11));
      }
    }
  }
#pragma unroll
  for (int h = 0; h < G; h++) {
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 4));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 8));
    wmax[h] = fmaxf(wmax[h], __shfl_xor_sync(0xffffffffu, wmax[h], 16));
    if (lane == 0) sm.wml[warp * G + h] = wmax[h];
  }
  MARK(1);
  csync();
  // The weights: lanes 0-15 of warp w, tiles w, w + 7, …: head lane >> 3, key pair lane & 7; lanes 16-31 the next tile.
  {
    const int ph = (lane >> 3) & 1, pq = lane & 7;
    float mh = -INFINITY;
    for (int w = 0; w < W; w++) mh = fmaxf(mh, sm.wml[w * G + ph]);
    float ls = 0.f;
    for (int j = warp + W * (lane >> 4); j < tiles; j += 2 * W) {
      const float2 sv = *reinterpret_cast<const float2*>(sm.s + ph * kMaxKeys + 16 * j + 2 * pq);
      const float p0 = ex2(sv.x - mh), p1 = ex2(sv.y - mh);
      ls += p0 + p1;
      sm.pw[j][ph][pq] = pack_bf2(p0, p1);
    }
    ls += __shfl_xor_sync(0xffffffffu, ls, 1);
    ls += __shfl_xor_sync(0xffffffffu, ls, 2);
    ls += __shfl_xor_sync(0xffffffffu, ls, 4);
    ls += __shfl_xor_sync(0xffffffffu, ls, 16);
    if ((lane & 23) == 0) sm.wl[warp * G + ph] = ls;  // lanes 0 and 8
    if (warp == 0 && (lane & 23) == 0) sm.rec[G * D + 2 * ph] = mh;
  }
  csync();
  MARK(2);
  const bool two = warp == 0;
  float o[4][4] = {}, o7[2][4] = {};
  const unsigned vbase = smem_addr(sm.v);
  const int vrow = (lane & 7) + ((lane >> 4) << 3), vcol = ((lane >> 3) & 1) * 8;
  for (int j0 = 0; j0 < tiles; j0 += 4) {
    unsigned bw[4][2], a[4][4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int j = min(j0 + u, tiles - 1);
      const bool real = col && j0 + u < tiles;
      const unsigned w0 = sm.pw[j][hr][t], w1 = sm.pw[j][hr][t + 4];
      bw[u][0] = real ? w0 : 0u;
      bw[u][1] = real ? w1 : 0u;
      ldsm_x4_t(vbase + ((16 * j + vrow) * SK + vcol) * 2 + warp * 32, a[u][0], a[u][1], a[u][2], a[u][3]);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) mma16816(o[u], a[u][0], a[u][1], a[u][2], a[u][3], bw[u][0], bw[u][1]);
    if (two) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int j = min(j0 + u, tiles - 1);
        ldsm_x4_t(vbase + ((16 * j + vrow) * SK + vcol) * 2 + 7 * 32, a[u][0], a[u][1], a[u][2], a[u][3]);
      }
#pragma unroll
      for (int u = 0; u < 4; u++) mma16816(o7[u & 1], a[u][0], a[u][1], a[u][2], a[u][3], bw[u][0], bw[u][1]);
    }
  }
  if (t == 0) {
    const int d0 = 16 * warp + g;
    sm.rec[d0] = (o[0][0] + o[1][0]) + (o[2][0] + o[3][0]);
    sm.rec[D + d0] = (o[0][1] + o[1][1]) + (o[2][1] + o[3][1]);
    sm.rec[d0 + 8] = (o[0][2] + o[1][2]) + (o[2][2] + o[3][2]);
    sm.rec[D + d0 + 8] = (o[0][3] + o[1][3]) + (o[2][3] + o[3][3]);
    if (two) {
      const int d1 = 16 * 7 + g;
      sm.rec[d1] = o7[0][0] + o7[1][0];
      sm.rec[D + d1] = o7[0][1] + o7[1][1];
      sm.rec[d1 + 8] = o7[0][2] + o7[1][2];
      sm.rec[D + d1 + 8] = o7[0][3] + o7[1][3];
    }
  }
  if (warp == 1 && lane < G) {
    float l = 0.f;
    for (int w = 0; w < W; w++) l += sm.wl[w * G + lane];
    sm.rec[G * D + 2 * lane + 1] = l;
  }
  MARK(3);
}

/** HMMA latency: a chain of 64 dependent m16n8k16 MMAs in one warp. */
__global__ void hmma_chain(unsigned long long* out) {
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  const unsigned a = 0x3c003c00u ^ threadIdx.x, b = 0x3c003c00u;
  __syncwarp();
  const long long t0 = clock64();
#pragma unroll
  for (int i = 0; i < 64; i++) mma16816(c, a, a, a, a, b, b);
  const long long t1 = clock64();
  if (threadIdx.x == 0) out[0] = t1 - t0;
  if (c[0] == 12345.f) out[1] = 1;
}

/** Rank 0 of a pair merges its record with the peer's (in sm.peer) into normalised outputs. */
__device__ void merge_pair(Smem& sm, float* out) {
  for (int o = threadIdx.x; o < G * D; o += C) {
    const int h = o / D;
    const float ma = sm.rec[G * D + 2 * h], la = sm.rec[G * D + 2 * h + 1];
    const float mb = sm.peer[G * D + 2 * h], lb = sm.peer[G * D + 2 * h + 1];
    const float mx = fmaxf(ma, mb), fa = exp2f(ma - mx), fb = exp2f(mb - mx);
    out[o] = (fa * sm.rec[o] + fb * sm.peer[o]) / (fa * la + fb * lb);
  }
}

struct Params {
  const bf16* kc;  // [pos][KV][D]
  const bf16* vc;
  const bf16* q;   // [KV][G][D], roped, bf16
  float* out;      // [KV][G][D]
  unsigned long long* flags;  // [grid][kRec] (value, epoch) for the global merge
  unsigned long long* times;  // [grid][iters][8] cycles: stage, attend, merge; [3] = globaltimer at the end
  int keys, per_head, mode, merge, iters, active, bulk;
};

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(C, 1) probe(Params p) {
  extern __shared__ __align__(128) uint8_t raw[];
  Smem& sm = *reinterpret_cast<Smem*>(raw);
  const int tid = threadIdx.x, b = blockIdx.x;
  const unsigned rank = cluster_rank();
  const bool active = b < p.active;
  const int head = (p.per_head == 2 ? b >> 1 : b) % KV, chunk = p.per_head == 2 ? static_cast<int>(rank) : 0;
  const int n_all = p.keys, per = (n_all + p.per_head - 1) / p.per_head;
  const int k0 = chunk * per, n = min(per, n_all - k0);
  const bf16* q = p.q + head * G * D;
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&sm.bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int i = tid; i < G * D; i += C) {
    sm.qs[i] = __bfloat162float(q[i]) * (rsqrtf(static_cast<float>(D)) * kLog2e);
    sm.qh[i] = q[i];
  }
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&sm.sbar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  cluster_sync_all();
  const uint64_t g0 = gtimer();
  const long long c0 = clock64();
  for (int it = 0; it < p.iters; it++) {
    cluster_sync_all();
    if (!active) continue;
    if (tid == 0 && p.merge == 1 && rank == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&sm.bar)), "r"(kRec * 4)
                   : "memory");
    const long long t0 = clock64();
    // Stage the chunk's keys and values (rows past n, up to a 16-key tile, are zeros).
    const int rows = (n + 15) / 16 * 16;
    if (p.bulk) {  // one bulk copy (256 bytes) per key row and per value row, completing on sbar
      if (tid == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&sm.sbar)), "r"(n * 2 * D * 2)
                     : "memory");
      csync();  // (the expectation is set before any copy completes: not required, but keeps the phase simple)
      for (int i = tid; i < 2 * n; i += C) {
        const int r = i >> 1;
        const bf16* src = ((i & 1) ? p.vc : p.kc) + (static_cast<int64_t>(k0 + r) * KV + head) * D;
        bf16* dst = ((i & 1) ? sm.v : sm.k) + r * SK;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
            "l"(src), "r"(D * 2), "r"(smem_addr(&sm.sbar))
            : "memory");
      }
      for (int i = n * 32 + tid; i < rows * 32; i += C) {
        const int r = i >> 5, part = i & 31;
        *reinterpret_cast<uint4*>(part < 16 ? sm.k + r * SK + part * 8 : sm.v + r * SK + (part - 16) * 8) =
            make_uint4(0, 0, 0, 0);
      }
      unsigned ok = 0;
      while (!ok)
        asm volatile("{\n .reg .pred pr;\n mbarrier.try_wait.parity.shared::cta.b64 pr, [%1], %2;\n selp.u32 %0, 1, 0, pr;\n}"
                     : "=r"(ok)
                     : "r"(smem_addr(&sm.sbar)), "r"(static_cast<unsigned>(it & 1))
                     : "memory");
    } else {
      for (int i = tid; i < rows * 32; i += C) {
        const int r = i >> 5, part = i & 31;
        bf16* dst = part < 16 ? sm.k + r * SK + part * 8 : sm.v + r * SK + (part - 16) * 8;
        if (r < n) {
          const int64_t src = (static_cast<int64_t>(k0 + r) * KV + head) * D + (part & 15) * 8;
          cp_async16(dst, (part < 16 ? p.kc : p.vc) + src);
        } else {
          *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
      }
      cp_async_wait_all();
    }
    csync();
    const long long t1 = clock64();
    if (p.mode == 0)
      attend_fma(sm, n);
    else if (p.mode == 1)
      attend_mma(sm, q, n);
    else if (p.mode == 2)
      attend_mma2(sm, n);
    else
      attend_mma3(sm, n);
    csync();
    const long long t2 = clock64();
    float* out = p.out + head * G * D;
    if (p.per_head == 1) {
      for (int o = tid; o < G * D; o += C) out[o] = sm.rec[o] / sm.rec[G * D + 2 * (o / D) + 1];
    } else if (p.merge == 1) {  // DSMEM: rank 1 stores its record into rank 0's `peer`, completing bytes on its barrier
      if (rank == 1) {
        const unsigned dst = mapa(smem_addr(sm.peer), 0), bar = mapa(smem_addr(&sm.bar), 0);
        for (int i = tid; i < kRec; i += C)
          asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(dst + 4 * i),
                       "r"(__float_as_uint(sm.rec[i])), "r"(bar)
                       : "memory");
      } else {
        unsigned ok = 0;
        const unsigned parity = it & 1;
        while (!ok)
          asm volatile(
              "{\n .reg .pred pr;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 pr, [%1], %2;\n selp.u32 "
              "%0, 1, 0, pr;\n}"
              : "=r"(ok)
              : "r"(smem_addr(&sm.bar)), "r"(parity)
              : "memory");
        merge_pair(sm, out);
      }
    } else {  // flagged words in global memory: rank 1 stores (value, epoch) pairs, rank 0 polls them
      unsigned long long* f = p.flags + static_cast<int64_t>(b >> 1) * kRec;
      const unsigned epoch = static_cast<unsigned>(it + 1);
      if (rank == 1) {
        for (int i = tid; i < kRec; i += C) {
          const unsigned long long w = (static_cast<unsigned long long>(epoch) << 32) | __float_as_uint(sm.rec[i]);
          asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(f + i), "l"(w) : "memory");
        }
      } else {
        for (int i = tid; i < kRec; i += C) {
          unsigned long long w;
          do asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(f + i) : "memory");
          while (static_cast<unsigned>(w >> 32) != epoch);
          sm.peer[i] = __uint_as_float(static_cast<unsigned>(w));
        }
        csync();
        merge_pair(sm, out);
      }
    }
    csync();
    const long long t3 = clock64();
    if (tid == 0) {
      unsigned long long* tt = p.times + (static_cast<int64_t>(b) * p.iters + it) * 8;
      tt[0] = t1 - t0;
      tt[1] = t2 - t1;
      tt[2] = t3 - t2;
      for (int i = 0; i < 4; i++) {
        long long mx = 0;
        for (int w = 0; w < W; w++) mx = max(mx, sm.mark[w][i] - t1);
        tt[4 + i] = mx;
      }
    }
  }
  cluster_sync_all();
  const uint64_t g1 = gtimer();
  const long long c1 = clock64();
  if (tid == 0 && active) {  // the clock rate: cycles per ns of this block's whole loop
    p.times[(static_cast<int64_t>(b) * p.iters) * 8 + 3] =
        static_cast<unsigned long long>(1000.0 * static_cast<double>(c1 - c0) / static_cast<double>(g1 - g0));
  }
}

static float host_bf(bf16 v) { return __bfloat162float(v); }

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, shared memory per block %zu bytes, Smem %zu bytes\n", prop.name, sms,
         prop.sharedMemPerBlockOptin, sizeof(Smem));
  const int grid = sms / 2 * 2;
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sizeof(Smem))));
  {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(C);
    cfg.dynamicSmemBytes = sizeof(Smem);
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, probe, &cfg));
    printf("clusters of 2 resident: %d (grid %d)\n", clusters, grid);
    if (clusters * 2 < grid) {
      printf("not every block is resident: stop\n");
      return 1;
    }
  }
  {
    unsigned long long* d;
    CK(cudaMalloc(&d, 16));
    hmma_chain<<<1, 32>>>(d);
    CK(cudaGetLastError());
    unsigned long long h[2];
    CK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost));
    printf("HMMA.16816 dependent chain: %.1f cycles per MMA\n", h[0] / 64.0);
    CK(cudaFree(d));
  }
  const int max_pos = 2 * kMaxKeys;
  std::vector<bf16> hk(static_cast<size_t>(max_pos) * KV * D), hv(hk.size()), hq(KV * G * D);
  srand(7);
  auto rnd = [] { return static_cast<float>(rand()) / RAND_MAX * 2.f - 1.f; };
  // Keys and queries of RMS about 1-2 (after QK-norm), so that scores spread over several units.
  for (auto& x : hk) x = __float2bfloat16(rnd() * 2.5f);
  for (auto& x : hv) x = __float2bfloat16(rnd());
  for (auto& x : hq) x = __float2bfloat16(rnd() * 2.5f);
  bf16 *dk, *dv, *dq;
  float* dout;
  unsigned long long *dflags, *dtimes;
  const int iters = 200;
  CK(cudaMalloc(&dk, hk.size() * 2));
  CK(cudaMalloc(&dv, hv.size() * 2));
  CK(cudaMalloc(&dq, hq.size() * 2));
  CK(cudaMalloc(&dout, KV * G * D * 4));
  CK(cudaMalloc(&dflags, static_cast<size_t>(grid) * kRec * 8));
  CK(cudaMalloc(&dtimes, static_cast<size_t>(grid) * iters * 8 * 8));
  CK(cudaMemcpy(dk, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));

  printf("\n| mode | keys per head | blocks per head | merge | active blocks | stage µs | attend µs (median / p90 over blocks×iters) | "
         "merge µs | attend + merge, slowest block per iteration (median) | max rel. err | SM MHz | marks µs (slowest warp: start, body, after barrier, end) |\n");
  printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  struct Case {
    int mode, keys, per_head, merge, active, bulk;
  };
  std::vector<Case> cases;
  for (int active : {16, grid}) {
    for (int keys : {56, 112, 192, 256, 384}) {
      for (int mode : {0, 2, 3}) cases.push_back({mode, keys, 1, 0, active, 1});
    }
    for (int keys : {112, 192, 256, 384}) {
      for (int mode : {0, 3})
        for (int merge : {1, 2}) cases.push_back({mode, keys, 2, merge, active, 1});
    }
  }
  if (argc == 7) cases = {{atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6])}};
  for (const Case& cs : cases) {
    CK(cudaMemset(dout, 0xff, KV * G * D * 4));  // poisoned: NaN unless written
    CK(cudaMemset(dflags, 0, static_cast<size_t>(grid) * kRec * 8));
    Params p{dk, dv, dq, dout, dflags, dtimes, cs.keys, cs.per_head, cs.mode, cs.merge, iters, cs.active, cs.bulk};
    probe<<<grid, C, sizeof(Smem)>>>(p);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<unsigned long long> ht(static_cast<size_t>(grid) * iters * 8);
    CK(cudaMemcpy(ht.data(), dtimes, ht.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<float> out(KV * G * D);
    CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    // Reference (double), every head that ran.
    double max_err = 0;
    const int heads_run = std::min(KV, cs.per_head == 2 ? cs.active / 2 : cs.active);
    for (int h = 0; h < heads_run; h++)
      for (int qh = 0; qh < G; qh++) {
        std::vector<double> s(cs.keys);
        double mx = -1e300;
        for (int k = 0; k < cs.keys; k++) {
          double acc = 0;
          for (int d = 0; d < D; d++)
            acc += static_cast<double>(host_bf(hq[(h * G + qh) * D + d])) * host_bf(hk[(static_cast<size_t>(k) * KV + h) * D + d]);
          s[k] = acc / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[k]);
        }
        double den = 0;
        for (int k = 0; k < cs.keys; k++) den += std::exp(s[k] - mx);
        double num2 = 0, err2 = 0;
        for (int d = 0; d < D; d++) {
          double num = 0;
          for (int k = 0; k < cs.keys; k++) num += std::exp(s[k] - mx) * host_bf(hv[(static_cast<size_t>(k) * KV + h) * D + d]);
          const double ref = num / den, got = out[(h * G + qh) * D + d];
          num2 += ref * ref;
          err2 += std::isfinite(got) ? (got - ref) * (got - ref) : 1e300;
        }
        max_err = std::max(max_err, std::sqrt(err2 / num2));
      }
    std::vector<double> stage, att, mrg, crit, marks[4];
    double cyc_per_us = 0;
    for (int b = 0; b < cs.active; b++) cyc_per_us += ht[(static_cast<size_t>(b) * iters) * 8 + 3];
    cyc_per_us /= cs.active;  // cycles per µs (×1000 / 1000)
    for (int it = 10; it < iters; it++) {
      double worst = 0;
      for (int b = 0; b < cs.active; b++) {
        const unsigned long long* tt = &ht[(static_cast<size_t>(b) * iters + it) * 8];
        for (int i = 0; i < 4; i++) marks[i].push_back(tt[4 + i] / cyc_per_us);
        stage.push_back(tt[0] / cyc_per_us);
        att.push_back(tt[1] / cyc_per_us);
        mrg.push_back(tt[2] / cyc_per_us);
        worst = std::max(worst, (tt[1] + tt[2]) / cyc_per_us);
      }
      crit.push_back(worst);
    }
    auto pct = [](std::vector<double> v, double f) {
      std::sort(v.begin(), v.end());
      return v[static_cast<size_t>(f * (v.size() - 1))];
    };
    printf("| %s%s | %d | %d | %s | %d | %.3f | %.3f / %.3f | %.3f | %.3f | %.2e | %.0f | %.3f %.3f %.3f %.3f |\n", cs.mode == 0 ? "fma" : cs.mode == 1 ? "mma" : cs.mode == 2 ? "mma2" : "mma3", cs.bulk ? ", bulk" : "", cs.keys,
           cs.per_head, cs.per_head == 1 ? "none" : cs.merge == 1 ? "DSMEM" : "global flags", cs.active,
           pct(stage, 0.5), pct(att, 0.5), pct(att, 0.9), pct(mrg, 0.5), pct(crit, 0.5), max_err, cyc_per_us, pct(marks[0], 0.5), pct(marks[1], 0.5), pct(marks[2], 0.5), pct(marks[3], 0.5));
  }
  return 0;
}
