// RMSNorm and fused residual-add + RMSNorm. One block per row; the row stays in registers between the
// sum-of-squares and the scaling pass, so each element is read from memory once and written once. Rows that
// are not a whole number of 16-byte vectors (or misaligned) take a scalar two-pass path.
#include "../common/cuda_check.h"
#include "../common/numeric.cuh"
#include "rmsnorm.h"

namespace qk {
namespace {

// Persistent over rows: each block keeps its slice of `weight` in registers and walks rows with a grid stride,
// so the weight is read once per block instead of once per row, and no block waits on a weight load.
// Wide per-thread slices (VPT >= 4) run with at most 256 threads so the row and weight slices stay in registers.
template <typename T, int VPT, bool kAdd>
__global__ void __launch_bounds__(VPT >= 4 ? 256 : 1024) rmsnorm_vec_kernel(T* __restrict__ out, T* __restrict__ residual_out,
                                                           const T* __restrict__ x, const T* __restrict__ residual,
                                                           const T* __restrict__ weight, int rows, int n, float eps) {
  __shared__ float scratch[32];
  constexpr int V = kVec<T>;
  Vec<T> w[VPT];
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const int idx = (threadIdx.x + i * blockDim.x) * V;
    if (idx < n) w[i] = load_vec(weight + idx);
  }
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const size_t row = static_cast<size_t>(r) * n;
    Vec<T> vals[VPT];
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const int idx = (threadIdx.x + i * blockDim.x) * V;
      if (idx < n) vals[i] = load_vec_stream(x + row + idx);
    }
    float sum_sq = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const int idx = (threadIdx.x + i * blockDim.x) * V;
      if (idx < n) {
        if constexpr (kAdd) {
          const Vec<T> res = load_vec_stream(residual + row + idx);
#pragma unroll
          for (int j = 0; j < V; j++) vals[i].v[j] = from_float<T>(to_float(vals[i].v[j]) + to_float(res.v[j]));
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
        Vec<T> o;
#pragma unroll
        for (int j = 0; j < V; j++) o.v[j] = from_float<T>(to_float(vals[i].v[j]) * inv * to_float(w[i].v[j]));
        store_vec(out + row + idx, o);
      }
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

/** Grid of the persistent kernel: every row gets a block if all fit at once, else as many as are resident. */
template <typename T, int VPT, bool kAdd>
cudaError_t launch_vec(const RmsnormArgs& a, int threads, cudaStream_t stream) {
  int device = 0, sms = 0, per_sm = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&device));
  QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  QK_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rmsnorm_vec_kernel<T, VPT, kAdd>, threads, 0));
  const long long resident = static_cast<long long>(sms) * (per_sm > 0 ? per_sm : 1);
  const unsigned grid = static_cast<unsigned>(a.rows < resident ? a.rows : resident);
  rmsnorm_vec_kernel<T, VPT, kAdd><<<grid, threads, 0, stream>>>(
      static_cast<T*>(a.out), static_cast<T*>(a.residual_out), static_cast<const T*>(a.x),
      static_cast<const T*>(a.residual), static_cast<const T*>(a.weight), static_cast<int>(a.rows),
      static_cast<int>(a.n), a.eps);
  return cudaGetLastError();
}

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
    // Few rows: spread each row over more threads (one or two vectors each) so its loads issue at once. Many
    // rows: about four vectors per thread keeps loads in flight while more blocks share each SM.
    const int per_thread = a.rows < 512 ? 1 : 4;
    int threads = ((vectors + per_thread - 1) / per_thread + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    int vpt = (vectors + threads - 1) / threads;
    if (vpt >= 3) {
      threads = threads > 256 ? 256 : threads;
      vpt = (vectors + threads - 1) / threads;
    }
    switch (vpt) {
      case 1: return launch_vec<T, 1, kAdd>(a, threads, stream);
      case 2: return launch_vec<T, 2, kAdd>(a, threads, stream);
      case 3:
      case 4: return launch_vec<T, 4, kAdd>(a, threads, stream);
      case 5: case 6: case 7:
      case 8: return launch_vec<T, 8, kAdd>(a, threads, stream);
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
