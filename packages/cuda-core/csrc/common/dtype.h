// Element types shared with @qk/ops. The numeric codes are part of the binding's contract: src/binding.ts
// lists the same table, and the static_asserts pin the storage sizes the kernels assume.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace qk {

enum class DType : int32_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4, U8 = 5 };
constexpr int32_t kDTypeCount = 6;

static_assert(sizeof(float) == 4, "f32 is 4 bytes");
static_assert(sizeof(__half) == 2, "f16 is 2 bytes");
static_assert(sizeof(__nv_bfloat16) == 2, "bf16 is 2 bytes");
static_assert(sizeof(int32_t) == 4 && sizeof(int8_t) == 1 && sizeof(uint8_t) == 1, "integer sizes");

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I8: return 1;
    case DType::U8: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
  }
  return "?";
}

constexpr bool is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

}  // namespace qk
