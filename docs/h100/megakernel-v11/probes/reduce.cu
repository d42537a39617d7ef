// Device probe (v11): what an all-to-all costs when every block adds into every output (split-K), against the
// flagged-word hop of v5–v10 (each block publishes its own rows, every block gathers all of them).
//
// One block per SM, 256 threads. Warps 0–3 run the exchange `iters` times; with `load`, warps 4–7 of every block
// stream a 4 GB buffer from HBM meanwhile (the megakernel's weight stream keeps HBM saturated during every hop).
//   flag:   each block stores its share of n values as 8-byte flagged words (two bf16 + epoch); every block then
//           reads all n/2 words until each carries the iteration's epoch.
//   atomic: each block red.add.u64's one word per value ((fixed-point value << 8) | 1, `stride` bytes apart); every
//           block then reads all n words until each count (low 8 bits) reaches gridDim.x. Three buffers in turn: a
//           block clears its slice of the buffer two iterations ahead once it has seen the current one complete.
// gather: the hop as the kernel does it (224 threads, 16-byte loads, TMA stream) with two ways to re-poll.
// Prints ns per exchange (mean over iterations, block 0's clock).
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__device__ __forceinline__ uint64_t now_ns() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned long long ldv64(const unsigned long long* p) {
  unsigned long long v; asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ void stv64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_add(unsigned long long* p, unsigned long long v) {
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ void stream(const uint4* big, size_t words, volatile int* stop, float* sink) {
  const int t = threadIdx.x - 128;
  uint4 acc = make_uint4(0, 0, 0, 0);
  size_t i = (static_cast<size_t>(blockIdx.x) * 128 + t);
  const size_t step = static_cast<size_t>(gridDim.x) * 128;
  while (*stop == 0) {
#pragma unroll 8
    for (int j = 0; j < 64; j++) {
      uint4 v;
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(big + i));
      acc.x ^= v.x; acc.y += v.y;
      i += step; if (i >= words) i -= words;
    }
  }
  if (acc.x == 0x12345678u && acc.y == 7u) sink[0] = 1.f;
}

template <bool kAtomic>
__global__ void __launch_bounds__(256, 1) exchange(unsigned long long* buf, int n, int stride_words, int iters,
                                                   const uint4* big, size_t words, int* stop, float* sink,
                                                   unsigned base_epoch, unsigned long long* out, int* bad) {
  extern __shared__ uint8_t smem[];
  if (threadIdx.x >= 128) {
    if (big != nullptr) stream(big, words, stop, sink);
    return;
  }
  const int tid = threadIdx.x;
  const unsigned grid = gridDim.x;
  uint64_t t0 = 0;
  for (int it = 0; it < iters; it++) {
    if (it == 1) t0 = now_ns();  // the first exchange also pays the start-up skew
    const unsigned epoch = base_epoch + it;
    if (kAtomic) {
      unsigned long long* b = buf + static_cast<size_t>(it % 3) * n * stride_words;
      for (int e = tid; e < n; e += 128) {
        const long long fixed = static_cast<long long>((blockIdx.x + 1) * 3 + e) << 20;  // a value, as fixed point
        red_add(b + static_cast<size_t>(e) * stride_words, (static_cast<unsigned long long>(fixed) << 8) | 1ull);
      }
      for (int e = tid; e < n; e += 128) {
        unsigned long long v;
        do { v = ldv64(b + static_cast<size_t>(e) * stride_words); } while ((v & 0xff) != grid && *(volatile int*)stop == 0);
        const long long want = (static_cast<long long>(grid) * (grid + 1) / 2 * 3 + static_cast<long long>(grid) * e) << 20;
        if ((static_cast<long long>(v) >> 8) != want) atomicAdd(bad, 1);
      }
      // Clear this block's slice of the buffer two exchanges ahead (last read in exchange it − 1: every block has
      // added into exchange it, so every block has finished reading it − 1).
      asm volatile("bar.sync 1, 128;" ::: "memory");
      unsigned long long* c = buf + static_cast<size_t>((it + 2) % 3) * n * stride_words;
      const int per = (n + grid - 1) / grid;
      for (int e = blockIdx.x * per + tid; e < min(n, (int)(blockIdx.x + 1) * per); e += 128) c[static_cast<size_t>(e) * stride_words] = 0ull;
      __threadfence();
      asm volatile("bar.sync 1, 128;" ::: "memory");
    } else {
      unsigned long long* b = buf + static_cast<size_t>(it & 1) * (n / 2);
      // This block's rows: pairs [p0, p1) of n/2.
      const int pairs = n / 2;
      const int p0 = pairs * blockIdx.x / grid, p1 = pairs * (blockIdx.x + 1) / grid;
      for (int p = p0 + tid; p < p1; p += 128) stv64(b + p, (static_cast<unsigned long long>(epoch) << 32) | (p & 0xffff));
      for (int p = tid; p < pairs; p += 128) {
        unsigned long long v;
        do { v = ldv64(b + p); } while (static_cast<unsigned>(v >> 32) != epoch && *(volatile int*)stop == 0);
        if ((v & 0xffffffffull) != static_cast<unsigned long long>(p & 0xffff)) atomicAdd(bad, 1);
      }
      asm volatile("bar.sync 1, 128;" ::: "memory");
    }
  }
  if (tid == 0 && blockIdx.x == 0) {
    out[0] = now_ns() - t0;
    *(volatile int*)stop = 1;
  }
}


// The flagged-word hop as the megakernel does it: 7 warps (224 threads) gather n values in 16-byte loads (two words
// each); warp 7's lane 0 streams HBM with TMA bulk copies into shared memory meanwhile (`load`). Re-poll modes:
//   0: v10's flag_gather: a batch of up to 4 loads per thread, then each word that was not ready is spun on alone,
//      one after another (a late word costs a round trip per word still pending behind it);
//   1: a batch, then every pending load of the thread is issued again together until all are ready.
__device__ __forceinline__ uint4 ldv128(const void* p) {
  unsigned long long lo, hi;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
}
__device__ __forceinline__ unsigned saddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ bool mb_try(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(saddr(bar)), "r"(parity) : "memory");
  return ok != 0;
}
__device__ void tma_stream(const uint8_t* big, size_t bytes, uint8_t* smem, uint64_t* bars, volatile int* stop) {
  const unsigned chunk = 16384;
  size_t off = static_cast<size_t>(blockIdx.x) * chunk;
  const size_t step = static_cast<size_t>(gridDim.x) * chunk;
  int i = 0;
  for (; *stop == 0; i++) {
    const int s = i & 3;
    if (i >= 4) while (!mb_try(&bars[s], ((i >> 2) - 1) & 1)) {}
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(&bars[s])), "r"(chunk) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(saddr(smem + s * chunk)), "l"(big + off), "r"(chunk), "r"(saddr(&bars[s])) : "memory");
    off += step; if (off + chunk > bytes) off = static_cast<size_t>(blockIdx.x) * chunk;
    if (i >= 1) while (!mb_try(&bars[(i - 1) & 3], ((i - 1) >> 2) & 1)) {}  // one copy in flight besides this one
  }
  if (i >= 1) while (!mb_try(&bars[(i - 1) & 3], ((i - 1) >> 2) & 1)) {}  // nothing in flight at exit
}
template <int kMode>
__global__ void __launch_bounds__(256, 1) gather(unsigned long long* buf, int n, int iters, const uint8_t* big, size_t bytes,
                                                 int* stop, unsigned base_epoch, unsigned long long* out, int* bad) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t bars[4];
  if (threadIdx.x == 224) { for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&bars[i])) : "memory"); }
  __syncthreads();
  if (threadIdx.x >= 224) {
    if (threadIdx.x == 224 && big != nullptr) tma_stream(big, bytes, smem, bars, stop);
    return;
  }
  const int tid = threadIdx.x;
  const unsigned grid = gridDim.x;
  const int pairs = n / 2, loads = n / 4;
  uint64_t t0 = 0;
  for (int it = 0; it < iters; it++) {
    if (it == 1) t0 = now_ns();
    const unsigned epoch = base_epoch + it;
    unsigned long long* b = buf + static_cast<size_t>(it & 1) * pairs;
    const int p0 = pairs * blockIdx.x / grid, p1 = pairs * (blockIdx.x + 1) / grid;
    for (int p = p0 + tid; p < p1; p += 224) stv64(b + p, (static_cast<unsigned long long>(epoch) << 32) | (p & 0xffff));
    for (int base = tid; base < loads; base += 224 * 4) {
      uint4 v[4];
      bool ready[4];
#pragma unroll
      for (int j = 0; j < 4; j++) { const int i = base + j * 224; if (i < loads) v[j] = ldv128(b + 2 * i); }
#pragma unroll
      for (int j = 0; j < 4; j++) { const int i = base + j * 224; ready[j] = i >= loads || (v[j].y == epoch && v[j].w == epoch); }
      if (kMode == 0) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int i = base + j * 224;
          while (!ready[j]) { v[j] = ldv128(b + 2 * i); ready[j] = (v[j].y == epoch && v[j].w == epoch) || *(volatile int*)stop; }
        }
      } else {
        for (;;) {
          bool all = true;
#pragma unroll
          for (int j = 0; j < 4; j++) all = all && ready[j];
          if (all || *(volatile int*)stop) break;
#pragma unroll
          for (int j = 0; j < 4; j++) if (!ready[j]) v[j] = ldv128(b + 2 * (base + j * 224));
#pragma unroll
          for (int j = 0; j < 4; j++) if (!ready[j]) ready[j] = v[j].y == epoch && v[j].w == epoch;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int i = base + j * 224;
        if (i < loads && (v[j].x != static_cast<unsigned>((2 * i) & 0xffff) || v[j].z != static_cast<unsigned>((2 * i + 1) & 0xffff))) atomicAdd(bad, 1);
      }
    }
    asm volatile("bar.sync 1, 224;" ::: "memory");
  }
  if (tid == 0 && blockIdx.x == 0) { out[0] = now_ns() - t0; *(volatile int*)stop = 1; }
}

int gather_probe(int sms, const uint8_t* big, size_t big_bytes, unsigned long long* buf, size_t buf_bytes, unsigned long long* out, int* stop, int* bad, unsigned& epoch) {
  const int smem = 200 * 1024, iters = 2001;
  CK(cudaFuncSetAttribute(gather<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(gather<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int load = 0; load < 2; load++)
    for (int n : {1024, 2048, 3072, 4096})
      for (int mode = 0; mode < 2; mode++) {
        double best = 1e30; int badsum = 0;
        for (int rep = 0; rep < 3; rep++) {
          CK(cudaMemset(buf, 0, buf_bytes)); CK(cudaMemset(stop, 0, 4)); CK(cudaMemset(bad, 0, 4));
          if (mode == 0) gather<0><<<sms, 256, smem>>>(buf, n, iters, load ? big : nullptr, big_bytes, stop, epoch, out, bad);
          else gather<1><<<sms, 256, smem>>>(buf, n, iters, load ? big : nullptr, big_bytes, stop, epoch, out, bad);
          CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
          epoch += iters;
          unsigned long long ns; int b;
          CK(cudaMemcpy(&ns, out, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&b, bad, 4, cudaMemcpyDeviceToHost));
          badsum += b; best = std::min(best, double(ns) / (iters - 1));
        }
        printf("TMA load %d  n %5d  gather, %s  %8.1f ns per exchange  (bad %d)\n", load, n,
               mode == 0 ? "v10 re-poll one word at a time" : "re-poll every pending load together", best, badsum);
      }
  return 0;
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t big_bytes = size_t(4) << 30;
  uint4* big; CK(cudaMalloc(&big, big_bytes)); CK(cudaMemset(big, 1, big_bytes));
  unsigned long long* buf; const size_t buf_bytes = size_t(64) << 20; CK(cudaMalloc(&buf, buf_bytes));
  unsigned long long* out; CK(cudaMalloc(&out, 64));
  int* stop; CK(cudaMalloc(&stop, 4)); int* bad; CK(cudaMalloc(&bad, 4)); float* sink; CK(cudaMalloc(&sink, 4));
  const int smem = 200 * 1024;
  CK(cudaFuncSetAttribute(exchange<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(exchange<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int iters = 2001;
  unsigned epoch = 1;
  printf("grid %d, %d exchanges each\n", sms, iters - 1);
  for (int load = 0; load < 2; load++) {
    for (int n : {1024, 2048, 4096}) {
      for (int variant = 0; variant < 5; variant++) {
        const bool atomic = variant > 0;
        const int stride = variant == 1 ? 1 : variant == 2 ? 4 : variant == 3 ? 16 : 32;
        double best = 1e30;
        int badsum = 0;
        for (int rep = 0; rep < 3; rep++) {
          CK(cudaMemset(buf, 0, buf_bytes)); CK(cudaMemset(stop, 0, 4)); CK(cudaMemset(bad, 0, 4));
          if (atomic)
            exchange<true><<<sms, 256, smem>>>(buf, n, stride, iters, load ? big : nullptr, big_bytes / 16, stop, sink, epoch, out, bad);
          else
            exchange<false><<<sms, 256, smem>>>(buf, n, stride, iters, load ? big : nullptr, big_bytes / 16, stop, sink, epoch, out, bad);
          CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
          epoch += iters;
          unsigned long long ns; int b;
          CK(cudaMemcpy(&ns, out, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&b, bad, 4, cudaMemcpyDeviceToHost));
          badsum += b;
          const double per = double(ns) / (iters - 1);
          if (per < best) best = per;
        }
        if (atomic) printf("load %d  n %5d  atomic, words %3d B apart   %8.1f ns per exchange  (bad %d)\n", load, n, stride * 8, best, badsum);
        else printf("load %d  n %5d  flagged words (v10 hop)     %8.1f ns per exchange  (bad %d)\n", load, n, best, badsum);
      }
    }
  }
  if (gather_probe(sms, reinterpret_cast<const uint8_t*>(big), big_bytes, buf, buf_bytes, out, stop, bad, epoch) != 0) return 1;
  return 0;
}
