// Device probe: cluster occupancy at the megakernel's shape, and hop latencies (global flag, DSMEM st.async, cluster barrier).
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint64_t now_ns() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned cluster_rank() { unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ unsigned mapa(unsigned addr, unsigned rank) {
  unsigned r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank)); return r;
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait_cluster(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  return ok != 0;
}
__device__ __forceinline__ void st_async(unsigned remote_addr, unsigned v, unsigned remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote_addr), "r"(v), "r"(remote_bar) : "memory");
}

__global__ void occ_kernel() { extern __shared__ uint8_t s[]; if (threadIdx.x == 9999) s[0] = 1; }

// Global ping-pong between block 0 and the last block.
__global__ void global_pingpong(unsigned* flags, int iters, uint64_t* out) {
  if (threadIdx.x != 0) return;
  volatile unsigned* a = flags; volatile unsigned* b = flags + 64;
  const bool ping = blockIdx.x == 0, pong = blockIdx.x == gridDim.x - 1;
  if (!ping && !pong) return;
  uint64_t t0 = now_ns();
  for (int i = 1; i <= iters; i++) {
    if (ping) { *a = i; while (*b != (unsigned)i) {} }
    else { while (*a != (unsigned)i) {} *b = i; }
  }
  if (ping) out[0] = now_ns() - t0;
}

// Fan-in: 8 producers (blocks spread over the grid) publish, block 0 waits for all, then publishes back. iters round trips.
__global__ void global_fanin(unsigned* flags, int iters, uint64_t* out) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int stride = gridDim.x / 8;
  int me = -1;
  for (int p = 0; p < 8; p++) if (blockIdx.x == 1 + p * stride) me = p;
  volatile unsigned* up = flags + 128;       // [8] * 32 apart
  volatile unsigned* down = flags + 1024;
  uint64_t t0 = now_ns();
  if (blockIdx.x == 0) {
    for (int i = 1; i <= iters; i++) {
      if (lane < 8) while (up[lane * 32] != (unsigned)i) {}
      __syncwarp();
      if (lane == 0) *down = i;
    }
    if (lane == 0) out[1] = now_ns() - t0;
  } else if (me >= 0 && lane == 0) {
    for (int i = 1; i <= iters; i++) { up[me * 32] = i; while (*down != (unsigned)i) {} }
  }
}

// DSMEM ping-pong inside a cluster: rank 0 and rank n-1 via st.async + mbarrier.
__global__ void dsmem_pingpong(int iters, uint64_t* out) {
  __shared__ uint64_t bar;
  __shared__ unsigned box[4];
  const unsigned rank = cluster_rank(), n = gridDim.x < 16 ? gridDim.x : 16;
  unsigned nrank; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nrank));
  if (threadIdx.x == 0) { mbar_init(&bar, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
  cluster_sync_all();
  const bool ping = rank == 0, pong = rank == nrank - 1;
  uint64_t t0 = now_ns();
  if (threadIdx.x == 0 && (ping || pong)) {
    const unsigned peer = ping ? nrank - 1 : 0;
    const unsigned rbox = mapa(smem_addr(box), peer), rbar = mapa(smem_addr(&bar), peer);
    unsigned parity = 0;
    for (int i = 1; i <= iters; i++) {
      if (ping) {
        st_async(rbox, i, rbar);
        mbar_arrive_expect(&bar, 4);
        while (!mbar_try_wait_cluster(&bar, parity)) {}
        parity ^= 1;
      } else {
        mbar_arrive_expect(&bar, 4);
        while (!mbar_try_wait_cluster(&bar, parity)) {}
        parity ^= 1;
        st_async(rbox, i, rbar);
      }
    }
    if (ping && blockIdx.x == 0) out[2] = now_ns() - t0;
  }
  cluster_sync_all();
  (void)n;
}

// Cluster barrier with every thread.
__global__ void cluster_barrier(int iters, uint64_t* out) {
  uint64_t t0 = now_ns();
  for (int i = 0; i < iters; i++) cluster_sync_all();
  if (blockIdx.x == 0 && threadIdx.x == 0) out[3] = now_ns() - t0;
}

int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("%s SMs %d smemOptin %zu\n", p.name, p.multiProcessorCount, p.sharedMemPerBlockOptin);
  const int smem = 200 * 1024;
  CK(cudaFuncSetAttribute(occ_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(occ_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int cs : {1, 2, 4, 8, 16}) {
    cudaLaunchConfig_t c{}; c.gridDim = dim3(cs * 8); c.blockDim = dim3(256); c.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = cs; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    c.attrs = at; c.numAttrs = 1;
    int n = 0; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, occ_kernel, &c);
    printf("cluster %2d: max active clusters %d (%s) -> %d blocks\n", cs, n, cudaGetErrorString(e), n * cs);
  }
  unsigned* flags; uint64_t* out; CK(cudaMalloc(&flags, 1 << 16)); CK(cudaMalloc(&out, 64)); CK(cudaMemset(flags, 0, 1 << 16));
  const int iters = 2000; uint64_t h[4] = {};
  for (int rep = 0; rep < 2; rep++) {
    CK(cudaMemset(flags, 0, 1 << 16));
    global_pingpong<<<132, 32>>>(flags, iters, out); CK(cudaDeviceSynchronize());
    CK(cudaMemset(flags, 0, 1 << 16));
    global_fanin<<<132, 32>>>(flags, iters, out); CK(cudaDeviceSynchronize());
    for (int cs : {2, 8, 16}) {
      CK(cudaFuncSetAttribute(dsmem_pingpong, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      CK(cudaFuncSetAttribute(cluster_barrier, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      cudaLaunchConfig_t c{}; c.gridDim = dim3(cs); c.blockDim = dim3(256);
      cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = cs; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
      c.attrs = at; c.numAttrs = 1;
      CK(cudaLaunchKernelEx(&c, dsmem_pingpong, iters, out)); CK(cudaDeviceSynchronize());
      c.gridDim = dim3(cs * 8);
      CK(cudaLaunchKernelEx(&c, cluster_barrier, iters, out)); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h, out, 32, cudaMemcpyDeviceToHost));
      printf("rep %d cluster %2d: dsmem st.async round trip %.0f ns, cluster barrier (8 clusters, 256 thr) %.0f ns\n", rep, cs, h[2] / (double)iters, h[3] / (double)iters);
    }
    printf("rep %d global ping-pong round trip %.0f ns, fan-in 8 + fan-out round trip %.0f ns\n", rep, h[0] / (double)iters, h[1] / (double)iters);
  }
  return 0;
}
