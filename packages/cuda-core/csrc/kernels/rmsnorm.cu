// RMSNorm and fused residual-add + RMSNorm. One block per row; the row stays in registers between the
// sum-of-squares and the scaling pass, so each element is read from memory once and written once. Rows that
// are not a whole number of 16-byte vectors (or misaligned) take a scalar two-pass path.
#include "../common/cuda_check.h"
#include "../common/numeric.cuh"
#include "rmsnorm.h"

namespace qk {
namespace {

template <typename T, int VPT, bool kAdd>
__global__ void __launch_bounds__(1024) rmsnorm_vec_kernel(T* __restrict__ out, T* __restrict__ residual_out,
                                                           const T* __restrict__ x, const T* __restrict__ residual,
                                                           const T* __restrict__ weight, int n, float eps) {
  __shared__ float scratch[32];
  constexpr int V = kVec<T>;
  const size_t row = static_cast<size_t>(blockIdx.x) * n;
  Vec<T> vals[VPT];
  float sum_sq = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const int idx = (threadIdx.x + i * blockDim.x) * V;
    if (idx < n) {
      vals[i] = load_vec_stream(x + row + idx);
      if constexpr (kAdd) {
        const Vec<T> r = load_vec_stream(residual + row + idx);
#pragma unroll
        for (int j = 0; j < V; j++) vals[i].v[j] = from_float<T>(to_float(vals[i].v[j]) + to_float(r.v[j]));
        store_vec(residual_out + row + idx, vals[i]);
      }
#pragma unroll
      for (int j = 0; j < V; j++) {
        const float f = to_float(vals[i].v[j]);
        sum_sq += f * f;
      }
    }
  }
  const float inv = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(n) + eps);
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const int idx = (threadIdx.x + i * blockDim.x) * V;
    if (idx < n) {
      const Vec<T> w = load_vec(weight + idx);
      Vec<T> o;
#pragma unroll
      for (int j = 0; j < V; j++) o.v[j] = from_float<T>(to_float(vals[i].v[j]) * inv * to_float(w.v[j]));
      store_vec(out + row + idx, o);
    }
  }
}

template <typename T, bool kAdd>
__global__ void rmsnorm_scalar_kernel(T* __restrict__ out, T* residual_out, const T* x, const T* residual,
                                      const T* __restrict__ weight, int n, float eps) {
  __shared__ float scratch[32];
  const size_t row = static_cast<size_t>(blockIdx.x) * n;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float f = to_float(x[row + i]);
    if constexpr (kAdd) {
      const T h = from_float<T>(f + to_float(residual[row + i]));
      residual_out[row + i] = h;
      f = to_float(h);
    }
    sum_sq += f * f;
  }
  const float inv = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(n) + eps);
  // Each thread re-reads only the elements it wrote (fused add) or read itself, so no barrier is needed.
  const T* src = kAdd ? residual_out : x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[row + i] = from_float<T>(to_float(src[row + i]) * inv * to_float(weight[i]));
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, bool kAdd>
cudaError_t launch_typed(const RmsnormArgs& a, cudaStream_t stream) {
  T* out = static_cast<T*>(a.out);
  T* res_out = static_cast<T*>(a.residual_out);
  const T* x = static_cast<const T*>(a.x);
  const T* res = static_cast<const T*>(a.residual);
  const T* w = static_cast<const T*>(a.weight);
  const int n = static_cast<int>(a.n);
  const dim3 grid(static_cast<unsigned>(a.rows));
  constexpr int V = kVec<T>;
  const bool vec_ok = n % V == 0 && aligned16(out) && aligned16(x) && aligned16(w) &&
                      (!kAdd || (aligned16(res) && aligned16(res_out)));
  if (vec_ok) {
    const int vectors = n / V;
    // About four vectors per thread keeps several loads in flight without starving the SM of blocks.
    int threads = ((vectors + 3) / 4 + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const int vpt = (vectors + threads - 1) / threads;
    switch (vpt) {
      case 1: rmsnorm_vec_kernel<T, 1, kAdd><<<grid, threads, 0, stream>>>(out, res_out, x, res, w, n, a.eps); return cudaGetLastError();
      case 2: rmsnorm_vec_kernel<T, 2, kAdd><<<grid, threads, 0, stream>>>(out, res_out, x, res, w, n, a.eps); return cudaGetLastError();
      case 3:
      case 4: rmsnorm_vec_kernel<T, 4, kAdd><<<grid, threads, 0, stream>>>(out, res_out, x, res, w, n, a.eps); return cudaGetLastError();
      case 5: case 6: case 7:
      case 8: rmsnorm_vec_kernel<T, 8, kAdd><<<grid, threads, 0, stream>>>(out, res_out, x, res, w, n, a.eps); return cudaGetLastError();
      default: break;  // rows wider than 8 vectors × 1024 threads: scalar path
    }
  }
  int threads = n < 1024 ? ((n + 31) / 32) * 32 : 1024;
  if (threads < 32) threads = 32;
  rmsnorm_scalar_kernel<T, kAdd><<<grid, threads, 0, stream>>>(out, res_out, x, res, w, n, a.eps);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rmsnorm(const RmsnormArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  if (a.rows > 0x7fffffff || a.n > 0x7fffffff) return cudaErrorInvalidValue;
  const bool add = a.residual != nullptr;
  QK_DISPATCH_FLOAT(a.dtype, T, { return add ? launch_typed<T, true>(a, stream) : launch_typed<T, false>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
