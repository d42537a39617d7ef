// SwiGLU, a bandwidth-bound elementwise kernel (two reads and one write per element). The aligned path moves
// 16-byte vectors: each thread loads kUnroll chunks of gate and up (2·kUnroll 16-byte loads in flight, streamed
// past L1) before computing any, then writes kUnroll 16-byte vectors; a grid-stride loop covers any size with
// 64-bit indices. Rows `in_stride` apart (fused gate-up layout) are walked with a division-free row cursor.
// Widths that are not whole vectors, or misaligned pointers, take the same kernel one element per chunk.
// The sigmoid uses the hardware exp2 and reciprocal (__expf, __fdividef): with the IEEE expf and division the
// kernel issues enough instructions per byte to fall to ~60% of copy bandwidth on an H100 at ffn 18944; the fast
// forms cost a few float32 ulps, far inside the bf16/f16/f32 tolerances.
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "elementwise.h"
#include "swiglu.h"

namespace qk {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 2;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/** E elements of T: one 16-byte vector, or one element on the scalar path. */
template <typename T, int E> struct alignas(E == 1 ? alignof(T) : 16) Chunk {
  T v[E];
};

template <typename T, int E> __device__ __forceinline__ Chunk<T, E> load_chunk(const T* p) {
  if constexpr (E == 1) {
    return Chunk<T, E>{{p[0]}};
  } else {
    static_assert(E * sizeof(T) == 16, "vector chunks are 16 bytes");
    const Vec<T> v = load_vec_stream(p);
    return *reinterpret_cast<const Chunk<T, E>*>(&v);
  }
}

template <typename T, int E> __device__ __forceinline__ void store_chunk(T* p, const Chunk<T, E>& c) {
  if constexpr (E == 1) {
    p[0] = c.v[0];
  } else {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&c);
  }
}

/**
 * silu(g)·u = g·u / (1 + e^−g). Limits: e^−g overflows to +inf for g < −88, and the approximate division then gives
 * −0 (the true value is below 1e-36); NaN propagates; g = −inf gives NaN, as the reference's −inf/inf does.
 */
__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

/**
 * kDense: gate and up rows are ffn apart like out's (in_stride = ffn), so chunk c is at c·E in all three.
 * Otherwise gate/up chunk c is at row·in_stride + col·E.
 */
template <typename T, int E, bool kDense>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(T* out, const T* gate, const T* up, int64_t chunks,
                                                          int64_t cpr, int64_t in_stride) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * kUnroll;
  grid_dependency_wait();
  allow_dependents_launch();
  RowCursor cur{0, 0};
  int64_t lane_rows = 0, lane_cols = 0, stride_rows = 0, stride_cols = 0;
  if constexpr (!kDense) {
    cur = RowCursor{first / cpr, first % cpr};
    lane_rows = blockDim.x / cpr;
    lane_cols = blockDim.x % cpr;
    const int64_t rest = stride - static_cast<int64_t>(kUnroll - 1) * blockDim.x;
    stride_rows = rest / cpr;
    stride_cols = rest % cpr;
  }
  for (int64_t base = first; base < chunks; base += stride) {
    Chunk<T, E> g[kUnroll], u[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) {
        const int64_t at = kDense ? c * E : cur.row * in_stride + cur.col * E;
        g[k] = load_chunk<T, E>(gate + at);
        u[k] = load_chunk<T, E>(up + at);
      }
      if constexpr (!kDense) {
        if (k + 1 < kUnroll) cur.advance(lane_rows, lane_cols, cpr);
      }
    }
    if constexpr (!kDense) cur.advance(stride_rows, stride_cols, cpr);
#pragma unroll
    for (int k = 0; k < kUnroll; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) {
        Chunk<T, E> o;
#pragma unroll
        for (int j = 0; j < E; j++) o.v[j] = from_float<T>(silu_mul(to_float(g[k].v[j]), to_float(u[k].v[j])));
        store_chunk<T, E>(out + c * E, o);
      }
    }
  }
}

template <typename T, int E>
cudaError_t launch_chunks(const SwigluArgs& a, T* out, const T* gate, const T* up, cudaStream_t stream) {
  const int64_t cpr = a.ffn / E;
  const int64_t chunks = a.rows * cpr;
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks((chunks + kThreads * kUnroll - 1) / (kThreads * kUnroll), kThreads, &blocks));
  const auto kernel = a.in_stride == a.ffn ? swiglu_kernel<T, E, true> : swiglu_kernel<T, E, false>;
  return launch_kernel(kernel, dim3(blocks), dim3(kThreads), 0, stream, out, gate, up, chunks, cpr, a.in_stride);
}

template <typename T> cudaError_t launch_typed(const SwigluArgs& a, cudaStream_t stream) {
  T* out = static_cast<T*>(a.out);
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  constexpr int V = kVec<T>;
  const bool vec_ok = a.ffn % V == 0 && a.in_stride % V == 0 && aligned16(out) && aligned16(gate) && aligned16(up);
  return vec_ok ? launch_chunks<T, V>(a, out, gate, up, stream) : launch_chunks<T, 1>(a, out, gate, up, stream);
}

}  // namespace

cudaError_t launch_swiglu(const SwigluArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.ffn < 0 || a.in_stride < a.ffn) return cudaErrorInvalidValue;
  if (a.rows == 0 || a.ffn == 0) return cudaSuccess;
  QK_DISPATCH_FLOAT(a.dtype, T, { return launch_typed<T>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
