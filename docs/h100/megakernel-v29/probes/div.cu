// Probe (NOTES.md v29): the staged attention's weight division (weight_div in
// packages/cuda-core/csrc/common/weight_div.cuh, the megakernel's own) against __fdiv_rn, bit for bit, over p = 0
// and every float p in [2^-100, 1], for 64 sums l in [1, 2^20]: 1, 2, 3, the largest float below 2, 384, 2^20 and 58
// seeded random ones. Prints the count of differences (and the first few) and exits 1 if there is any.
// Build and run from this folder: nvcc -O3 -arch=sm_90a -o div div.cu && ./div
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>

#include "../../../../packages/cuda-core/csrc/common/weight_div.cuh"

using qk::weight_div;

__global__ void check(const float* ls, int nl, uint32_t lo, uint32_t hi, unsigned long long* bad, uint4* first) {
  if (blockIdx.x == 0 && threadIdx.x < nl) {  // p = 0
    const float l = ls[threadIdx.x];
    const float a = weight_div(0.f, l), b = __fdiv_rn(0.f, l);
    if (__float_as_uint(a) != __float_as_uint(b)) {
      const unsigned long long k = atomicAdd(bad, 1ull);
      if (k < 8) first[k] = make_uint4(0u, __float_as_uint(l), __float_as_uint(a), __float_as_uint(b));
    }
  }
  for (uint32_t pb = lo + blockIdx.x * blockDim.x + threadIdx.x; pb <= hi && pb >= lo; pb += gridDim.x * blockDim.x) {
    const float p = __uint_as_float(pb);
    for (int j = 0; j < nl; j++) {
      const float l = ls[j];
      const float a = weight_div(p, l), b = __fdiv_rn(p, l);
      if (__float_as_uint(a) != __float_as_uint(b)) {
        const unsigned long long k = atomicAdd(bad, 1ull);
        if (k < 8) first[k] = make_uint4(pb, __float_as_uint(l), __float_as_uint(a), __float_as_uint(b));
      }
    }
  }
}

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e = (x);                                                               \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                     \
      return 2;                                                                        \
    }                                                                                  \
  } while (0)

int main() {
  std::vector<float> ls = {1.f, 2.f, 3.f, std::nextafter(2.f, 0.f), 384.f, 1048576.f};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  while (ls.size() < 64) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0;  // [0, 1)
    ls.push_back(static_cast<float>(std::exp2(u * 20.0)));              // [1, 2^20)
  }
  float* dl;
  unsigned long long* bad;
  uint4* first;
  CK(cudaMalloc(&dl, ls.size() * sizeof(float)));
  CK(cudaMalloc(&bad, sizeof(unsigned long long)));
  CK(cudaMalloc(&first, 8 * sizeof(uint4)));
  CK(cudaMemcpy(dl, ls.data(), ls.size() * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemset(bad, 0, sizeof(unsigned long long)));
  float lo_f = 0x1p-100f, hi_f = 1.f;
  uint32_t lo, hi;
  std::memcpy(&lo, &lo_f, 4);
  std::memcpy(&hi, &hi_f, 4);
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  CK(cudaEventRecord(t0));
  check<<<132 * 16, 256>>>(dl, static_cast<int>(ls.size()), lo, hi, bad, first);
  CK(cudaGetLastError());
  CK(cudaEventRecord(t1));
  CK(cudaDeviceSynchronize());
  float ms = 0.f;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  unsigned long long nbad = 0;
  uint4 f[8];
  CK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(f, first, sizeof(f), cudaMemcpyDeviceToHost));
  const double n = (static_cast<double>(hi - lo) + 2) * ls.size();
  std::printf("weight_div against __fdiv_rn: %.0f pairs (p = 0 and every p in [2^-100, 1], %zu sums), %llu differ, %.1f ms\n", n,
              ls.size(), nbad, ms);
  for (unsigned long long k = 0; k < nbad && k < 8; k++) {
    float p, l, a, b;
    std::memcpy(&p, &f[k].x, 4), std::memcpy(&l, &f[k].y, 4), std::memcpy(&a, &f[k].z, 4), std::memcpy(&b, &f[k].w, 4);
    std::printf("  p %a l %a: %a against %a\n", p, l, a, b);
  }
  return nbad == 0 ? 0 : 1;
}
