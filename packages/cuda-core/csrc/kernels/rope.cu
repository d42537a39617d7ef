// RoPE and fused QK-norm + RoPE. A group of L lanes (a power of two ≤ 32) owns one (token, head) at a time: lane l
// holds pair-vectors j = l, l + L, … (P of them, V pairs each: 16-byte vectors when aligned) of both halves, so the
// head is read once and written once, and for QK-norm its sum of squares is reduced across the group with
// shuffles. A block takes one token at a time (grid-stride over tokens): its threads first fill a shared table of
// the token's (cos, sin) per pair (one accurate sincosf per pair and token), then its groups walk the heads, two
// at a time with all four 16-byte loads issued before any store. Heads too wide for the group's registers take a
// one-warp-per-head kernel that reads the head twice (QK-norm) and computes sincosf per element.
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "elementwise.h"
#include "rope.h"

namespace qk {
namespace {

constexpr int kMaxThreads = 128;
constexpr int kWarpKernelThreads = 128;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/** V elements of T (one 16-byte vector when V = kVec<T>). */
template <typename T, int V> struct alignas(V * sizeof(T) == 16 ? 16 : alignof(T)) Pack {
  T v[V];
};

template <typename T, int V> __device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  Pack<T, V> out;
  if constexpr (V * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(&out) = *reinterpret_cast<const uint4*>(p);
  } else {
#pragma unroll
    for (int i = 0; i < V; i++) out.v[i] = p[i];
  }
  return out;
}

template <typename T, int V> __device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& in) {
  if constexpr (V * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&in);
  } else {
#pragma unroll
    for (int i = 0; i < V; i++) p[i] = in.v[i];
  }
}

/** The rotation angle of a pair: one float32 multiply, exactly as the host reference rounds it. */
__device__ __forceinline__ float rope_angle(float pos, const float* inv_freq, int i) {
  return __fmul_rn(pos, __ldg(inv_freq + i));
}

template <typename T, int V, int P, int H, bool kNorm>
__global__ void __launch_bounds__(kMaxThreads)
    rope_group_kernel(T* out, const T* x, const T* __restrict__ weight, const int32_t* __restrict__ positions,
                      const float* __restrict__ inv_freq, int64_t tokens, int heads, int head_dim, int lane_bits,
                      float eps) {
  extern __shared__ float2 cos_sin[];  // [half]: (cos, sin) of each pair at the current token
  const int half = head_dim >> 1;
  const int pv = half / V;  // pair-vectors per head
  const int lanes = 1 << lane_bits;
  const int lane = threadIdx.x & (lanes - 1);
  const int group = threadIdx.x >> lane_bits;
  const int groups = blockDim.x >> lane_bits;
  grid_dependency_wait();
  allow_dependents_launch();

  const float inv_n = 1.f / static_cast<float>(head_dim);

  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float pos = static_cast<float>(__ldg(positions + t));
    __syncthreads();  // the previous token's table has been read
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      float2 cs;
      sincosf(rope_angle(pos, inv_freq, i), &cs.y, &cs.x);
      cos_sin[i] = cs;
    }
    __syncthreads();
    // QK-norm weights of this lane's pairs (the same for every head; reloaded per token from cache rather than
    // kept live across sincosf, whose wide-argument path needs many registers).
    Pack<T, V> w_lo[P], w_hi[P];
    if constexpr (kNorm) {
#pragma unroll
      for (int p = 0; p < P; p++) {
        const int j = lane + p * lanes;
        if (j < pv) {
          w_lo[p] = load_pack<T, V>(weight + j * V);
          w_hi[p] = load_pack<T, V>(weight + half + j * V);
        }
      }
    }
    // H heads per step, all loaded before any is written (in-place rotation forbids the compiler from hoisting
    // the next head's loads above this one's stores). Every lane runs the same number of steps: the group
    // shuffles need the whole warp.
    for (int hb = 0; hb < heads; hb += groups * H) {
      Pack<T, V> lo[H][P], hi[H][P];
      int64_t row[H];
      bool valid[H];
#pragma unroll
      for (int u = 0; u < H; u++) {
        const int h = hb + u * groups + group;
        valid[u] = h < heads;
        row[u] = (t * heads + h) * static_cast<int64_t>(head_dim);
#pragma unroll
        for (int p = 0; p < P; p++) {
          const int j = lane + p * lanes;
          if (valid[u] && j < pv) {
            lo[u][p] = load_pack<T, V>(x + row[u] + j * V);
            hi[u][p] = load_pack<T, V>(x + row[u] + half + j * V);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < H; u++) {
        float scale = 1.f;
        if constexpr (kNorm) {
          float sum_sq = 0.f;
#pragma unroll
          for (int p = 0; p < P; p++) {
            const int j = lane + p * lanes;
            if (valid[u] && j < pv) {
#pragma unroll
              for (int i = 0; i < V; i++) {
                const float a = to_float(lo[u][p].v[i]);
                const float b = to_float(hi[u][p].v[i]);
                sum_sq += a * a + b * b;
              }
            }
          }
          for (int offset = lanes >> 1; offset > 0; offset >>= 1) {
            sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
          }
          scale = rsqrtf(sum_sq * inv_n + eps);
        }
#pragma unroll
        for (int p = 0; p < P; p++) {
          const int j = lane + p * lanes;
          if (valid[u] && j < pv) {
            Pack<T, V> y_lo, y_hi;
#pragma unroll
            for (int i = 0; i < V; i++) {
              float a = to_float(lo[u][p].v[i]);
              float b = to_float(hi[u][p].v[i]);
              if constexpr (kNorm) {
                a = a * scale * to_float(w_lo[p].v[i]);
                b = b * scale * to_float(w_hi[p].v[i]);
              }
              const float2 cs = cos_sin[j * V + i];
              y_lo.v[i] = from_float<T>(a * cs.x - b * cs.y);
              y_hi.v[i] = from_float<T>(b * cs.x + a * cs.y);
            }
            store_pack<T, V>(out + row[u] + j * V, y_lo);
            store_pack<T, V>(out + row[u] + half + j * V, y_hi);
          }
        }
      }
    }
  }
}

/** Wide heads: one warp per (token, head), scalar; QK-norm reads the head twice (sum of squares, then rotate). */
template <typename T, bool kNorm>
__global__ void __launch_bounds__(kWarpKernelThreads)
    rope_warp_kernel(T* out, const T* x, const T* __restrict__ weight, const int32_t* __restrict__ positions,
                     const float* __restrict__ inv_freq, int64_t tokens, int64_t heads, int64_t head_dim, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  const int64_t items = tokens * heads;
  const int64_t half = head_dim >> 1;
  grid_dependency_wait();
  allow_dependents_launch();
  for (int64_t item = blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < items;
       item += gridDim.x * warps_per_block) {
    const int64_t t = item / heads;
    const int64_t row = item * head_dim;
    float scale = 1.f;
    if constexpr (kNorm) {
      float sum_sq = 0.f;
      for (int64_t i = lane; i < head_dim; i += 32) {
        const float v = to_float(x[row + i]);
        sum_sq += v * v;
      }
      scale = rsqrtf(warp_sum(sum_sq) / static_cast<float>(head_dim) + eps);
    }
    const float pos = static_cast<float>(__ldg(positions + t));
    // Each lane reads and writes only its own pairs, so in-place works without a barrier.
    for (int64_t i = lane; i < half; i += 32) {
      float s, c;
      sincosf(rope_angle(pos, inv_freq, static_cast<int>(i)), &s, &c);
      float a = to_float(x[row + i]);
      float b = to_float(x[row + half + i]);
      if constexpr (kNorm) {
        a = a * scale * to_float(weight[i]);
        b = b * scale * to_float(weight[half + i]);
      }
      out[row + i] = from_float<T>(a * c - b * s);
      out[row + half + i] = from_float<T>(b * c + a * s);
    }
  }
}

template <typename T, int V, int P, bool kNorm>
cudaError_t launch_group(const RopeArgs& a, int lane_bits, cudaStream_t stream) {
  // A group per four heads of a token (two steps of two), at most kMaxThreads per block.
  const int64_t lanes = int64_t{1} << lane_bits;
  const int64_t groups = (a.heads + 3) / 4;
  int64_t threads = (groups * lanes + 31) / 32 * 32;
  threads = threads < 32 ? 32 : (threads > kMaxThreads ? kMaxThreads : threads);
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks(a.tokens, static_cast<int>(threads), &blocks));
  const size_t smem = static_cast<size_t>(a.head_dim / 2) * sizeof(float2);
  return launch_kernel(rope_group_kernel<T, V, P, (P == 1 ? 2 : 1), kNorm>, dim3(blocks),
                       dim3(static_cast<unsigned>(threads)), smem, stream, static_cast<T*>(a.out),
                       static_cast<const T*>(a.x), static_cast<const T*>(a.weight), a.positions, a.inv_freq, a.tokens,
                       static_cast<int>(a.heads), static_cast<int>(a.head_dim), lane_bits, a.eps);
}

/** Smallest P in {1, 2, 4} (with P·V ≤ 16 pairs per lane) that covers `pv` pair-vectors with ≤ 32 lanes. */
template <typename T, int V, bool kNorm> cudaError_t try_group(const RopeArgs& a, int64_t pv, bool* launched,
                                                               cudaStream_t stream) {
  auto bits_for = [](int64_t lanes_needed) {
    int bits = 0;
    while ((int64_t{1} << bits) < lanes_needed) bits++;
    return bits;
  };
  *launched = true;
  if (pv <= 32) return launch_group<T, V, 1, kNorm>(a, bits_for(pv), stream);
  if constexpr (2 * V <= 16) {
    if (pv <= 64) return launch_group<T, V, 2, kNorm>(a, 5, stream);
  }
  if constexpr (4 * V <= 16) {
    if (pv <= 128) return launch_group<T, V, 4, kNorm>(a, 5, stream);
  }
  *launched = false;
  return cudaSuccess;
}

template <typename T, bool kNorm> cudaError_t launch_typed(const RopeArgs& a, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const int64_t half = a.head_dim / 2;
  // Head rows are whole 16-byte vectors when half is: head_dim·sizeof(T) is then a multiple of 32 bytes.
  const bool vec_ok = half % V == 0 && aligned16(a.out) && aligned16(a.x) && (!kNorm || aligned16(a.weight));
  if (a.head_dim <= INT32_MAX && a.heads <= INT32_MAX) {
    bool launched = false;
    const cudaError_t err = vec_ok ? try_group<T, V, kNorm>(a, half / V, &launched, stream)
                                   : try_group<T, 1, kNorm>(a, half, &launched, stream);
    if (launched) return err;
  }
  unsigned blocks = 0;
  const int64_t warps = kWarpKernelThreads / 32;
  QK_RETURN_IF_ERROR(grid_stride_blocks((a.tokens * a.heads + warps - 1) / warps, kWarpKernelThreads, &blocks));
  return launch_kernel(rope_warp_kernel<T, kNorm>, dim3(blocks), dim3(kWarpKernelThreads), 0, stream,
                       static_cast<T*>(a.out), static_cast<const T*>(a.x), static_cast<const T*>(a.weight), a.positions,
                       a.inv_freq, a.tokens, a.heads, a.head_dim, a.eps);
}

}  // namespace

cudaError_t launch_rope(const RopeArgs& a, cudaStream_t stream) {
  if (a.tokens < 0 || a.heads < 0 || a.head_dim < 0 || a.head_dim % 2 != 0) return cudaErrorInvalidValue;
  if (a.tokens == 0 || a.heads == 0 || a.head_dim == 0) return cudaSuccess;
  const bool norm = a.weight != nullptr;
  QK_DISPATCH_FLOAT(a.dtype, T, { return norm ? launch_typed<T, true>(a, stream) : launch_typed<T, false>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
