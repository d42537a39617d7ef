// Elementwise kernels: unary ops with separate input and output dtypes, binary add/mul with per-operand dtypes
// and row/column broadcast, and the f32 row mean of the eager baselines. All are grid-stride loops with 64-bit
// indices. The vector path moves chunks of E elements, E = 16 bytes of the widest dtype involved, so each access of
// a warp is one fully coalesced instruction (16-byte lanes for the widest dtype, 8-byte lanes for a 16-bit dtype
// next to f32); each thread loads kUnroll chunks before computing any, keeping several loads in flight. Sizes that
// are not whole chunks (or misaligned pointers) take the same kernels with E = 1.
#include <atomic>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "elementwise.h"

namespace qk {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/** Elements per chunk: 16 bytes of the widest of the dtypes involved. */
template <typename... Ts> constexpr int chunk_elems() {
  size_t widest = 1;
  ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
  return static_cast<int>(16 / widest);
}

/** E elements of T in registers as stored (16-bit types stay packed until used, halving register use). */
template <typename T, int E> struct alignas(E * sizeof(T) == 16 ? 16 : (E * sizeof(T) == 8 ? 8 : alignof(T))) Chunk {
  T v[E];
};

// Loads/stores a chunk as one 16- or 8-byte access when it is that wide (the pointer is then aligned to it),
// else element by element.
template <typename T, int E> __device__ __forceinline__ void load_chunk(const T* p, Chunk<T, E>& c) {
  if constexpr (E * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(c.v) = *reinterpret_cast<const uint4*>(p);
  } else if constexpr (E * sizeof(T) == 8) {
    *reinterpret_cast<uint2*>(c.v) = *reinterpret_cast<const uint2*>(p);
  } else {
#pragma unroll
    for (int j = 0; j < E; j++) c.v[j] = p[j];
  }
}

template <typename T, int E> __device__ __forceinline__ void store_chunk(T* p, const Chunk<T, E>& c) {
  if constexpr (E * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(c.v);
  } else if constexpr (E * sizeof(T) == 8) {
    *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(c.v);
  } else {
#pragma unroll
    for (int j = 0; j < E; j++) p[j] = c.v[j];
  }
}

// ---------------------------------------------------------------------------------------------------------
// Unary

template <UnaryOp kOp> __device__ __forceinline__ float unary_fn(float x, float alpha) {
  if constexpr (kOp == UnaryOp::Silu) {
    return x / (1.f + expf(-x));
  } else if constexpr (kOp == UnaryOp::Gelu) {
    // x/2 · (1 + erf(x/√2)) written with erfc so large negative x keeps its relative accuracy.
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
  } else if constexpr (kOp == UnaryOp::GeluTanh) {
    // x/2 · (1 + tanh(u)) = x · σ(2u), u = √(2/π)·(x + 0.044715·x³): no cancellation for negative x.
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x / (1.f + expf(-2.f * u));
  } else if constexpr (kOp == UnaryOp::Square) {
    return x * x;
  } else if constexpr (kOp == UnaryOp::RsqrtAddScalar) {
    return 1.f / sqrtf(x + alpha);
  } else {
    return x;
  }
}

/** Chunks per thread per step: two for the transcendental ops (fewer registers, better overlap), four else. */
constexpr int unary_unroll(UnaryOp op) {
  return op == UnaryOp::Silu || op == UnaryOp::Gelu || op == UnaryOp::GeluTanh ? 2 : kUnroll;
}

template <typename TIn, typename TOut, UnaryOp kOp, int E>
__global__ void __launch_bounds__(kThreads) unary_kernel(TOut* out, const TIn* x, int64_t chunks, int64_t count,
                                                         float alpha) {
  constexpr int U = unary_unroll(kOp);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * U;
  grid_dependency_wait();
  allow_dependents_launch();
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x; base < chunks;
       base += stride) {
    Chunk<TIn, E> v[U];
#pragma unroll
    for (int k = 0; k < U; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) load_chunk(x + c * E, v[k]);
    }
#pragma unroll
    for (int k = 0; k < U; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) {
        Chunk<TOut, E> o;
#pragma unroll
        for (int j = 0; j < E; j++) o.v[j] = from_float<TOut>(unary_fn<kOp>(to_float(v[k].v[j]), alpha));
        store_chunk(out + c * E, o);
      }
    }
  }
  // The last count mod E elements (vector path only), one per thread of the first block.
  if (E > 1 && blockIdx.x == 0) {
    const int64_t i = chunks * E + threadIdx.x;
    if (i < count) out[i] = from_float<TOut>(unary_fn<kOp>(to_float(x[i]), alpha));
  }
}

template <typename TIn, typename TOut, UnaryOp kOp>
cudaError_t launch_unary_typed(const UnaryArgs& a, cudaStream_t stream) {
  TOut* out = static_cast<TOut*>(a.out);
  const TIn* x = static_cast<const TIn*>(a.x);
  constexpr int E = chunk_elems<TIn, TOut>();
  constexpr int64_t kPerBlock = int64_t{kThreads} * unary_unroll(kOp);
  const bool vec_ok = aligned16(out) && aligned16(x);
  const int64_t chunks = vec_ok ? a.count / E : a.count;
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks((chunks + kPerBlock - 1) / kPerBlock, kThreads, &blocks));
  const auto kernel = vec_ok ? unary_kernel<TIn, TOut, kOp, E> : unary_kernel<TIn, TOut, kOp, 1>;
  return launch_kernel(kernel, dim3(blocks), dim3(kThreads), 0, stream, out, x, chunks, a.count, a.alpha);
}

template <typename TIn, typename TOut> cudaError_t launch_unary_op(const UnaryArgs& a, cudaStream_t stream) {
  switch (a.op) {
    case UnaryOp::Silu: return launch_unary_typed<TIn, TOut, UnaryOp::Silu>(a, stream);
    case UnaryOp::Gelu: return launch_unary_typed<TIn, TOut, UnaryOp::Gelu>(a, stream);
    case UnaryOp::GeluTanh: return launch_unary_typed<TIn, TOut, UnaryOp::GeluTanh>(a, stream);
    case UnaryOp::Square: return launch_unary_typed<TIn, TOut, UnaryOp::Square>(a, stream);
    case UnaryOp::RsqrtAddScalar: return launch_unary_typed<TIn, TOut, UnaryOp::RsqrtAddScalar>(a, stream);
    case UnaryOp::Copy: return launch_unary_typed<TIn, TOut, UnaryOp::Copy>(a, stream);
  }
  return cudaErrorInvalidValue;
}

// ---------------------------------------------------------------------------------------------------------
// Binary

__device__ __forceinline__ float binary_fn(BinaryOp op, float a, float b) { return op == BinaryOp::Add ? a + b : a * b; }

template <typename TOut, typename TA, typename TB, Broadcast kB, int E>
__global__ void __launch_bounds__(kThreads) binary_kernel(TOut* out, const TA* a, const TB* b, BinaryOp op,
                                                          int64_t chunks, int64_t count, int64_t cpr) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * kUnroll;
  grid_dependency_wait();
  allow_dependents_launch();
  // Row bookkeeping for the broadcasts (chunks never straddle rows: the launcher picks E dividing n).
  RowCursor cur{0, 0};
  int64_t lane_rows = 0, lane_cols = 0, stride_rows = 0, stride_cols = 0;
  if constexpr (kB != Broadcast::None) {
    cur = RowCursor{first / cpr, first % cpr};
    lane_rows = blockDim.x / cpr;
    lane_cols = blockDim.x % cpr;
    // One grid step is `stride` chunks minus the (kUnroll - 1) lane steps taken inside the loop body.
    const int64_t rest = stride - static_cast<int64_t>(kUnroll - 1) * blockDim.x;
    stride_rows = rest / cpr;
    stride_cols = rest % cpr;
  }
  for (int64_t base = first; base < chunks; base += stride) {
    Chunk<TA, E> va[kUnroll];
    Chunk<TB, kB == Broadcast::PerRow ? 1 : E> vb[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) {
        load_chunk(a + c * E, va[k]);
        if constexpr (kB == Broadcast::None) {
          load_chunk(b + c * E, vb[k]);
        } else if constexpr (kB == Broadcast::PerRow) {
          vb[k].v[0] = b[cur.row];
        } else {
          load_chunk(b + cur.col * E, vb[k]);
        }
      }
      if constexpr (kB != Broadcast::None) {
        if (k + 1 < kUnroll) cur.advance(lane_rows, lane_cols, cpr);
      }
    }
    if constexpr (kB != Broadcast::None) cur.advance(stride_rows, stride_cols, cpr);
#pragma unroll
    for (int k = 0; k < kUnroll; k++) {
      const int64_t c = base + static_cast<int64_t>(k) * blockDim.x;
      if (c < chunks) {
        Chunk<TOut, E> o;
#pragma unroll
        for (int j = 0; j < E; j++) {
          const float bj = to_float(vb[k].v[kB == Broadcast::PerRow ? 0 : j]);
          o.v[j] = from_float<TOut>(binary_fn(op, to_float(va[k].v[j]), bj));
        }
        store_chunk(out + c * E, o);
      }
    }
  }
  // Tail of the flat (no-broadcast) vector path: the last count mod E elements.
  if constexpr (E > 1 && kB == Broadcast::None) {
    if (blockIdx.x == 0) {
      const int64_t i = chunks * E + threadIdx.x;
      if (i < count) out[i] = from_float<TOut>(binary_fn(op, to_float(a[i]), to_float(b[i])));
    }
  }
}

template <typename TOut, typename TA, typename TB, Broadcast kB>
cudaError_t launch_binary_typed(const BinaryArgs& p, cudaStream_t stream) {
  TOut* out = static_cast<TOut*>(p.out);
  const TA* a = static_cast<const TA*>(p.a);
  const TB* b = static_cast<const TB*>(p.b);
  constexpr int E = chunk_elems<TOut, TA, TB>();
  const int64_t count = p.rows * p.n;
  // Broadcasts need whole chunks per row; perColumn also reads b in 16-byte words.
  const bool vec_ok = aligned16(out) && aligned16(a) && (kB == Broadcast::PerRow || aligned16(b)) &&
                      (kB == Broadcast::None || p.n % E == 0);
  const int e = vec_ok ? E : 1;
  const int64_t chunks = count / e;
  const int64_t cpr = p.n / e;
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks((chunks + kThreads * kUnroll - 1) / (kThreads * kUnroll), kThreads, &blocks));
  const auto kernel = vec_ok ? binary_kernel<TOut, TA, TB, kB, E> : binary_kernel<TOut, TA, TB, kB, 1>;
  return launch_kernel(kernel, dim3(blocks), dim3(kThreads), 0, stream, out, a, b, p.op, chunks, count, cpr);
}

template <typename TOut, typename TA, typename TB>
cudaError_t launch_binary_broadcast(const BinaryArgs& p, cudaStream_t stream) {
  switch (p.broadcast) {
    case Broadcast::None: return launch_binary_typed<TOut, TA, TB, Broadcast::None>(p, stream);
    case Broadcast::PerRow: return launch_binary_typed<TOut, TA, TB, Broadcast::PerRow>(p, stream);
    case Broadcast::PerColumn: return launch_binary_typed<TOut, TA, TB, Broadcast::PerColumn>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// ---------------------------------------------------------------------------------------------------------
// Row mean

template <typename T, int E>
__global__ void __launch_bounds__(kThreads) row_mean_kernel(float* out, const T* x, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  const int64_t chunks = n / E;
  grid_dependency_wait();
  allow_dependents_launch();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    float sum = 0.f;
#pragma unroll 4
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      Chunk<T, E> v;
      load_chunk(row + c * E, v);
#pragma unroll
      for (int j = 0; j < E; j++) sum += to_float(v.v[j]);
    }
    const float total = block_sum(sum, scratch);
    if (threadIdx.x == 0) out[r] = total / static_cast<float>(n);
  }
}

template <typename T> cudaError_t launch_row_mean_typed(const RowMeanArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  constexpr int E = kVec<T>;
  const bool vec_ok = a.n % E == 0 && aligned16(x);
  const int64_t chunks = vec_ok ? a.n / E : a.n;
  // One block per row, about four chunks per thread; short rows get one warp.
  int64_t threads = ((chunks + 3) / 4 + 31) / 32 * 32;
  threads = threads < 32 ? 32 : (threads > kThreads ? kThreads : threads);
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks(a.rows, static_cast<int>(threads), &blocks));
  const auto kernel = vec_ok ? row_mean_kernel<T, E> : row_mean_kernel<T, 1>;
  return launch_kernel(kernel, dim3(blocks), dim3(static_cast<unsigned>(threads)), 0, stream, a.out, x, a.rows, a.n);
}

// Per-device cache of the SM count and resident threads per SM (device attributes never change).
constexpr int kMaxDevices = 64;
std::atomic<int> g_sms[kMaxDevices];
std::atomic<int> g_threads_per_sm[kMaxDevices];

}  // namespace

cudaError_t grid_stride_blocks(int64_t work_blocks, int threads, unsigned* blocks) {
  int device = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&device));
  int sms = device < kMaxDevices ? g_sms[device].load(std::memory_order_relaxed) : 0;
  int per_sm = device < kMaxDevices ? g_threads_per_sm[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0 || per_sm == 0) {
    QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    if (device < kMaxDevices) {
      g_sms[device].store(sms, std::memory_order_relaxed);
      g_threads_per_sm[device].store(per_sm, std::memory_order_relaxed);
    }
  }
  const int64_t resident = static_cast<int64_t>(sms) * (per_sm / threads > 0 ? per_sm / threads : 1);
  int64_t b = work_blocks < resident ? work_blocks : resident;
  if (b < 1) b = 1;
  *blocks = static_cast<unsigned>(b);
  return cudaSuccess;
}

cudaError_t launch_unary(const UnaryArgs& a, cudaStream_t stream) {
  if (a.count <= 0) return a.count == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (static_cast<int32_t>(a.op) < 0 || static_cast<int32_t>(a.op) >= kUnaryOpCount) return cudaErrorInvalidValue;
  QK_DISPATCH_FLOAT(a.dtype_in, TIn, { QK_DISPATCH_FLOAT(a.dtype_out, TOut, { return launch_unary_op<TIn, TOut>(a, stream); }); });
  return cudaSuccess;
}

cudaError_t launch_binary(const BinaryArgs& p, cudaStream_t stream) {
  if (p.rows < 0 || p.n < 0) return cudaErrorInvalidValue;
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  if (p.op != BinaryOp::Add && p.op != BinaryOp::Mul) return cudaErrorInvalidValue;
  QK_DISPATCH_FLOAT(p.dtype_out, TOut, {
    QK_DISPATCH_FLOAT(p.dtype_a, TA, {
      QK_DISPATCH_FLOAT(p.dtype_b, TB, { return launch_binary_broadcast<TOut, TA, TB>(p, stream); });
    });
  });
  return cudaSuccess;
}

cudaError_t launch_row_mean(const RowMeanArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.n < 0) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.n == 0) return cudaErrorInvalidValue;  // the mean of nothing
  QK_DISPATCH_FLOAT(a.dtype_in, T, { return launch_row_mean_typed<T>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
