// Device probe (v17): does a second poll in flight per pending word make the flagged-word hop cheaper?
//
// The hop as the megakernel does it (v11's gather probe, reduce.cu): one block per SM; 7 warps (224 threads) publish
// their block's share of n values as flagged words, then every block gathers all n values in 16-byte loads (two
// words each, up to 4 loads per thread in a batch); warp 7's lane 0 streams HBM with TMA bulk copies meanwhile
// (`load`). A batch re-polls every pending load together (kernel since v11): a word that lands in L2 is seen on
// average one loaded round trip R later (half R until the next poll reaches L2, half R back). With two polls in flight
// per pending word, the second half a round trip behind the first, it would be seen after about 3R/4, if the poll
// that is still in flight when the thread leaves costs nothing. Modes:
//   1: the kernel's re-poll (one load in flight per pending word);
//   2: two register loads in flight per pending word, `gap` cycles apart (0: half the first poll's round trip);
//   3: the same, with both sets of polls as cp.async copies into a per-thread shared-memory slot (nothing left in a
//      register when the thread leaves; a copy still in flight lands in its slot, which is drained at the next
//      gather's start).
// Prints ns per exchange (publish + gather + barrier; mean over iterations, block 0's clock), best of 3 launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));               \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned clock32() {
  unsigned c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  return c;
}
__device__ __forceinline__ void stv64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint4 ldv128(const void* p) {
  unsigned long long lo, hi;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
}
__device__ __forceinline__ unsigned saddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(saddr(p)));
  return v;
}
__device__ __forceinline__ bool mb_try(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(saddr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

// One copy of 20 KB in flight at a time, as the megakernel's producer.
__device__ void tma_stream(const uint8_t* big, size_t bytes, uint8_t* smem, uint64_t* bars, volatile int* stop) {
  const unsigned chunk = 20480;
  size_t off = static_cast<size_t>(blockIdx.x) * chunk;
  const size_t step = static_cast<size_t>(gridDim.x) * chunk;
  int i = 0;
  for (; *stop == 0; i++) {
    const int s = i & 3;
    if (i >= 4)
      while (!mb_try(&bars[s], ((i >> 2) - 1) & 1)) {
      }
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(&bars[s])), "r"(chunk) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            saddr(smem + s * chunk)),
        "l"(big + off), "r"(chunk), "r"(saddr(&bars[s]))
        : "memory");
    off += step;
    if (off + chunk > bytes) off = static_cast<size_t>(blockIdx.x) * chunk;
    while (!mb_try(&bars[s], (i >> 2) & 1)) {
    }
  }
}

__device__ __forceinline__ bool ready(const uint4& v, unsigned epoch) { return v.y == epoch && v.w == epoch; }

template <int kMode>
__global__ void __launch_bounds__(256, 1) gather(unsigned long long* buf, int n, int iters, const uint8_t* big,
                                                 size_t bytes, int* stop, unsigned base_epoch, unsigned gap_arg,
                                                 unsigned long long* out, int* bad, unsigned long long* rtt_sum) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t bars[4];
  uint8_t* polls = smem + 4 * 20480;  // [224][2][4][16 B]
  if (threadIdx.x == 224)
    for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&bars[i])) : "memory");
  __syncthreads();
  if (threadIdx.x >= 224) {
    if (threadIdx.x == 224 && big != nullptr) tma_stream(big, bytes, smem, bars, stop);
    return;
  }
  const int tid = threadIdx.x;
  const unsigned grid = gridDim.x;
  const int pairs = n / 2, loads = n / 4;
  uint64_t t0 = 0;
  unsigned long long rtts = 0;
  unsigned wrong = 0;
  uint8_t* slot_a = polls + tid * 128;
  uint8_t* slot_b = slot_a + 64;
  for (int it = 0; it < iters; it++) {
    if (it == 1) t0 = now_ns();
    const unsigned epoch = base_epoch + it;
    unsigned long long* b = buf + static_cast<size_t>(it & 1) * pairs;
    const int p0 = pairs * blockIdx.x / grid, p1 = pairs * (blockIdx.x + 1) / grid;
    for (int p = p0 + tid; p < p1; p += 224) stv64(b + p, (static_cast<unsigned long long>(epoch) << 32) | (p & 0xffff));
    if (kMode == 3) asm volatile("cp.async.wait_all;" ::: "memory");
    for (int base = tid; base < loads; base += 224 * 4) {
      auto addr = [&](int j) { return b + 2 * (base + j * 224); };
      auto check = [&](int j, const uint4& v) {
        const int i = base + j * 224;
        if (v.x != static_cast<unsigned>((2 * i) & 0xffff) || v.z != static_cast<unsigned>((2 * i + 1) & 0xffff)) wrong++;
      };
      int count = 0;
      while (count < 4 && base + count * 224 < loads) count++;
      uint4 ra[4], rb[4];
      unsigned pending = 0;
      const unsigned c0 = clock32();
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (j < count) ra[j] = ldv128(addr(j));
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (j < count) {
          if (ready(ra[j], epoch)) check(j, ra[j]);
          else pending |= 1u << j;
        }
      if (pending == 0) continue;
      const unsigned rtt = clock32() - c0;
      rtts += rtt;
      const unsigned gap = gap_arg != 0 ? gap_arg : rtt / 2;
      if (kMode == 1) {
        for (;;) {
#pragma unroll
          for (int j = 0; j < 4; j++)
            if ((pending >> j) & 1u) ra[j] = ldv128(addr(j));
#pragma unroll
          for (int j = 0; j < 4; j++)
            if (((pending >> j) & 1u) && ready(ra[j], epoch)) {
              check(j, ra[j]);
              pending &= ~(1u << j);
            }
          if (pending == 0 || *(volatile int*)stop) break;
        }
      } else if (kMode == 2) {
#pragma unroll
        for (int j = 0; j < 4; j++)
          if ((pending >> j) & 1u) ra[j] = ldv128(addr(j));
        const unsigned c1 = clock32();
        while (clock32() - c1 < gap) {
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
          if ((pending >> j) & 1u) rb[j] = ldv128(addr(j));
        for (;;) {
#pragma unroll
          for (int j = 0; j < 4; j++)
            if (((pending >> j) & 1u) && ready(ra[j], epoch)) {
              check(j, ra[j]);
              pending &= ~(1u << j);
            }
          if (pending == 0 || *(volatile int*)stop) break;
#pragma unroll
          for (int j = 0; j < 4; j++)
            if ((pending >> j) & 1u) ra[j] = ldv128(addr(j));
#pragma unroll
          for (int j = 0; j < 4; j++)
            if (((pending >> j) & 1u) && ready(rb[j], epoch)) {
              check(j, rb[j]);
              pending &= ~(1u << j);
            }
          if (pending == 0) break;
#pragma unroll
          for (int j = 0; j < 4; j++)
            if ((pending >> j) & 1u) rb[j] = ldv128(addr(j));
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
          if ((pending >> j) & 1u) cp16(slot_a + 16 * j, addr(j));
        asm volatile("cp.async.commit_group;" ::: "memory");
        const unsigned c1 = clock32();
        while (clock32() - c1 < gap) {
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
          if ((pending >> j) & 1u) cp16(slot_b + 16 * j, addr(j));
        asm volatile("cp.async.commit_group;" ::: "memory");
        for (int set = 0;; set ^= 1) {
          uint8_t* slot = set == 0 ? slot_a : slot_b;
          asm volatile("cp.async.wait_group 1;" ::: "memory");  // the older set has landed
#pragma unroll
          for (int j = 0; j < 4; j++)
            if ((pending >> j) & 1u) {
              const uint4 v = lds128(slot + 16 * j);
              if (ready(v, epoch)) {
                check(j, v);
                pending &= ~(1u << j);
              }
            }
          if (pending == 0 || *(volatile int*)stop) break;
#pragma unroll
          for (int j = 0; j < 4; j++)
            if ((pending >> j) & 1u) cp16(slot + 16 * j, addr(j));
          asm volatile("cp.async.commit_group;" ::: "memory");
        }
      }
    }
    asm volatile("bar.sync 1, 224;" ::: "memory");
  }
  if (wrong != 0) atomicAdd(bad, static_cast<int>(wrong));
  atomicAdd(rtt_sum, rtts);
  if (tid == 0 && blockIdx.x == 0) {
    out[0] = now_ns() - t0;
    *(volatile int*)stop = 1;
  }
}

template <int kMode>
int run(int sms, int n, const uint8_t* big, size_t big_bytes, unsigned long long* buf, size_t buf_bytes,
        unsigned gap, unsigned long long* out, int* stop, int* bad, unsigned long long* rtt, unsigned& epoch,
        double& best_ns, int& bad_total, double& mean_rtt) {
  const int smem = 4 * 20480 + 224 * 128, iters = 2001;
  CK(cudaFuncSetAttribute(gather<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  best_ns = 1e30;
  bad_total = 0;
  for (int rep = 0; rep < 3; rep++) {
    CK(cudaMemset(buf, 0, buf_bytes));
    CK(cudaMemset(stop, 0, 4));
    CK(cudaMemset(bad, 0, 4));
    CK(cudaMemset(rtt, 0, 8));
    gather<kMode><<<sms, 256, smem>>>(buf, n, iters, big, big_bytes, stop, epoch, gap, out, bad, rtt);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    epoch += iters;
    unsigned long long ns, r;
    int b;
    CK(cudaMemcpy(&ns, out, 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&b, bad, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&r, rtt, 8, cudaMemcpyDeviceToHost));
    bad_total += b;
    best_ns = std::min(best_ns, double(ns) / (iters - 1));
    mean_rtt = double(r);
  }
  return 0;
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t big_bytes = size_t(4) << 30;
  uint8_t* big;
  CK(cudaMalloc(&big, big_bytes));
  CK(cudaMemset(big, 1, big_bytes));
  unsigned long long* buf;
  const size_t buf_bytes = size_t(1) << 20;
  CK(cudaMalloc(&buf, buf_bytes));
  unsigned long long *out, *rtt;
  CK(cudaMalloc(&out, 64));
  CK(cudaMalloc(&rtt, 8));
  int *stop, *bad;
  CK(cudaMalloc(&stop, 4));
  CK(cudaMalloc(&bad, 4));
  unsigned epoch = 1;
  printf("grid %d, 2000 exchanges each, best of 3 launches; rtt: summed first-poll round trips (cycles) of the last launch\n", sms);
  for (int load = 0; load < 2; load++)
    for (int n : {1024, 2048, 3072}) {
      struct V { int mode; unsigned gap; const char* name; };
      const V vs[] = {{1, 0, "one poll in flight (kernel)"}, {2, 0, "two register polls, gap rtt/2"},
                      {2, 200, "two register polls, gap 200"}, {2, 500, "two register polls, gap 500"},
                      {3, 0, "two cp.async polls, gap rtt/2"}, {3, 500, "two cp.async polls, gap 500"},
                      {1, 0, "one poll in flight (kernel), again"}};
      for (const V& v : vs) {
        double ns, r;
        int b;
        const uint8_t* bg = load ? big : nullptr;
        int rc = v.mode == 1   ? run<1>(sms, n, bg, big_bytes, buf, buf_bytes, v.gap, out, stop, bad, rtt, epoch, ns, b, r)
                 : v.mode == 2 ? run<2>(sms, n, bg, big_bytes, buf, buf_bytes, v.gap, out, stop, bad, rtt, epoch, ns, b, r)
                               : run<3>(sms, n, bg, big_bytes, buf, buf_bytes, v.gap, out, stop, bad, rtt, epoch, ns, b, r);
        if (rc != 0) return rc;
        printf("TMA load %d  n %4d  %-36s %8.1f ns per exchange  (bad %d, rtt sum %.3g)\n", load, n, v.name, ns, b, r);
      }
    }
  return 0;
}
