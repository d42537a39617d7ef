// Device probe (v11): what the weight ring's handshake costs per tile with no copies and no arithmetic, the way the
// megakernel runs it: one producer thread fills descriptors into `slots` slots (full mbarrier: 1 arrival), 7 consumer
// warps take every tile (wait full, read the descriptor, their row pairs' warp sums and a flagged store from lane 0,
// then every thread arrives on the slot's empty mbarrier). Variants:
//   arrivals: 224 (every consumer thread, as the kernel) or 7 (lane 0 after __syncwarp)
//   fence:    the producer's fence.proxy.async before each tile (as the kernel) or none
//   pairs:    row pairs per tile (5: a 10-row QKV tile; 2: gate/up; 1: down)
//   alone:    no producer: the consumers take descriptors as given (1: still arriving on the empty barriers; 2: not
//             even that), what the consumer side costs by itself
// Prints ns per tile (block 0's clock, 132 blocks running).
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)
constexpr int kWarps = 7, kConsumers = kWarps * 32;
__device__ __forceinline__ unsigned saddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint64_t now_ns() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(saddr(bar)), "r"(parity) : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) { while (!mbar_try_wait(bar, parity)) {} }
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int kArrivals, bool kFence, int kAlone = 0>
__global__ void __launch_bounds__(256, 1) ring(int tiles, int slots, int pairs_per_tile, unsigned long long* sink, unsigned long long* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t full[24], empty[24];
  __shared__ uint2 desc[24];
  if (threadIdx.x == 0) {
    for (int i = 0; i < slots; i++) { mbar_init(&full[i], 1); mbar_init(&empty[i], kArrivals); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x != kConsumers || kAlone != 0) return;
    int slot = 0; unsigned phase = 0;
    for (int t = 0; t < tiles; t++) {
      mbar_wait(&empty[slot], phase ^ 1u);
      if (kFence) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      desc[slot] = make_uint2(static_cast<unsigned>(t * 2 * pairs_per_tile), static_cast<unsigned>(2 * pairs_per_tile));
      mbar_arrive(&full[slot]);
      if (++slot == slots) { slot = 0; phase ^= 1u; }
    }
    return;
  }
  int slot = 0; unsigned phase = 0, pairs = 0;
  uint64_t t0 = 0;
  for (int t = 0; t < tiles; t++) {
    if (t == 64) t0 = now_ns();
    uint2 d;
    if (kAlone == 0) {
      mbar_wait(&full[slot], phase);
      d = desc[slot];
    } else {
      d = make_uint2(static_cast<unsigned>(t * 2 * pairs_per_tile), static_cast<unsigned>(2 * pairs_per_tile));
    }
    const int n = static_cast<int>(d.y);
    const int first = (warp + kWarps - static_cast<int>(pairs % kWarps)) % kWarps;
    pairs += static_cast<unsigned>(n + 1) / 2;
    for (int r = 2 * first; r < n; r += 2 * kWarps) {
      float a0 = warp_sum(static_cast<float>(lane + r)), a1 = warp_sum(static_cast<float>(lane - r));
      if (lane == 0) {
        const unsigned long long w = (static_cast<unsigned long long>(t) << 32) | __float_as_uint(a0 + a1);
        asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(sink + blockIdx.x * 64 + (d.x + r) % 64), "l"(w) : "memory");
      }
    }
    if (kAlone == 2) {
    } else if (kArrivals == kConsumers) {
      mbar_arrive(&empty[slot]);
    } else {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[slot]);
    }
    if (++slot == slots) { slot = 0; phase ^= 1u; }
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = now_ns() - t0;
}

template <int kArrivals, bool kFence, int kAlone = 0>
int run(int sms, int pairs, unsigned long long* sink, unsigned long long* out) {
  const int tiles = 64 + 20000, slots = 10, smem = 200 * 1024;
  CK(cudaFuncSetAttribute(ring<kArrivals, kFence, kAlone>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    ring<kArrivals, kFence, kAlone><<<sms, 256, smem>>>(tiles, slots, pairs, sink, out);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    unsigned long long ns; CK(cudaMemcpy(&ns, out, 8, cudaMemcpyDeviceToHost));
    best = std::min(best, double(ns) / 20000);
  }
  printf("pairs/tile %d  arrivals %3d  proxy fence %d  alone %d   %7.1f ns per tile\n", pairs, kArrivals, kFence ? 1 : 0, kAlone, best);
  return 0;
}

int main() {
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long *sink, *out; CK(cudaMalloc(&sink, sms * 64 * 8)); CK(cudaMalloc(&out, 8));
  for (int pairs : {5, 2, 1}) {
    if (run<kConsumers, true>(sms, pairs, sink, out)) return 1;
    if (run<kConsumers, false>(sms, pairs, sink, out)) return 1;
    if (run<kWarps, true>(sms, pairs, sink, out)) return 1;
    if (run<kWarps, false>(sms, pairs, sink, out)) return 1;
    if (run<kConsumers, true, 1>(sms, pairs, sink, out)) return 1;
    if (run<kConsumers, true, 2>(sms, pairs, sink, out)) return 1;
  }
  return 0;
}
