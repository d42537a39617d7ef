// Linear family bindings: argument conversion and checks only; the math is in csrc/kernels (gemv.cu, gemm.cu,
// quant.cu). Every device pointer is checked to cover the elements the kernel touches.
#include "../kernels/gemv.h"
#include "../kernels/quant.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

/** int4 group size: even, positive, dividing k (the reference's rules). */
int64_t int4_group(const Args& a, size_t i, int64_t k) {
  const int64_t group = a.int64(i, "groupSize", 1, INT32_MAX);
  if (group % 2 != 0) a.fail("groupSize", "must be even (two int4 values per byte), got " + std::to_string(group));
  if (k % group != 0) {
    a.fail("groupSize", "(" + std::to_string(group) + ") must divide k (" + std::to_string(k) + ")");
  }
  return group;
}

// linear(dtype, out, x, weight, bias, m, k, n, activation)
Napi::Value Linear(const Napi::CallbackInfo& info) {
  return guard(info, "linear", [](const Args& a) -> Napi::Value {
    a.expect_count(9);
    LinearArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.m = a.int64(5, "m", 0, INT32_MAX);
    r.k = a.int64(6, "k", 0, INT32_MAX);
    r.n = a.int64(7, "n", 0, INT32_MAX);
    r.act = static_cast<Activation>(a.int64(8, "activation", 0, kActivationCount - 1));
    r.out = a.tensor(1, "out", r.dtype, r.m * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.m * r.k);
    r.weight = a.tensor(3, "weight", r.dtype, r.n * r.k);
    r.bias = a.tensor(4, "bias", r.dtype, r.n, /*optional=*/true);
    launched("linear", launch_linear(r, stream()));
    return a.env().Undefined();
  });
}

// linearSwiglu(dtype, out, x, gateUp, m, k, n) -> whether the fused tensor-core kernel ran (false: it does not
// apply to this device, dtype, row count or alignment, and nothing was written). gateUp is [2n, k].
Napi::Value LinearSwiglu(const Napi::CallbackInfo& info) {
  return guard(info, "linearSwiglu", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    LinearArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.m = a.int64(4, "m", 0, INT32_MAX);
    r.k = a.int64(5, "k", 0, INT32_MAX);
    r.n = a.int64(6, "n", 0, INT32_MAX / 2);
    r.act = Activation::None;
    r.out = a.tensor(1, "out", r.dtype, r.m * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.m * r.k);
    r.weight = a.tensor(3, "gateUp", r.dtype, 2 * r.n * r.k);
    r.bias = nullptr;
    bool ran = false;
    launched("linearSwiglu", launch_linear_swiglu(r, stream(), &ran));
    return Napi::Boolean::New(a.env(), ran);
  });
}

/** Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte. */
bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

// rmsnormLinear(dtype, out, x, normWeight, weight, m, k, n, eps, residual, residualOut, glu)
// normWeight, residual and residualOut may be 0n (none); glu 1 = SwiGLU over [gate; up] weight rows (2n of them).
Napi::Value RmsnormLinear(const Napi::CallbackInfo& info) {
  return guard(info, "rmsnormLinear", [](const Args& a) -> Napi::Value {
    a.expect_count(12);
    RmsnormLinearArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    // Decode-sized M; the kernel takes any M up to 65535 chunks of 8 rows, each chunk streaming W again.
    r.m = a.int64(5, "m", 0, 65535LL * 8);
    r.k = a.int64(6, "k", 0, INT32_MAX);
    r.swiglu = a.int64(11, "glu", 0, 1) == 1;
    r.n = a.int64(7, "n", 0, r.swiglu ? INT32_MAX / 2 : INT32_MAX);
    r.eps = static_cast<float>(a.number(8, "eps"));
    r.out = a.tensor(1, "out", r.dtype, r.m * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.m * r.k);
    r.norm_weight = a.tensor(3, "normWeight", r.dtype, r.k, /*optional=*/true);
    r.weight = a.tensor(4, "weight", r.dtype, (r.swiglu ? 2 : 1) * r.n * r.k);
    r.residual = a.tensor(9, "residual", r.dtype, r.m * r.k, /*optional=*/true);
    r.residual_out = a.tensor(10, "residualOut", r.dtype, r.m * r.k, /*optional=*/true);
    if (r.residual != nullptr && r.norm_weight == nullptr) a.fail("residual", "needs normWeight (the add feeds the norm)");
    if (r.residual_out != nullptr) {
      if (r.residual == nullptr) a.fail("residualOut", "needs residual");
      const size_t bytes = static_cast<size_t>(r.m * r.k) * dtype_size(r.dtype);
      if (overlaps(r.residual_out, bytes, r.x, bytes) || overlaps(r.residual_out, bytes, r.residual, bytes)) {
        a.fail("residualOut", "must not overlap x or residual (every block reads them while one block writes it)");
      }
    }
    launched("rmsnormLinear", launch_rmsnorm_linear(r, stream()));
    return a.env().Undefined();
  });
}

// quantizeInt8(dtype, qweight, scales, weight, n, k)
Napi::Value QuantizeInt8(const Napi::CallbackInfo& info) {
  return guard(info, "quantizeInt8", [](const Args& a) -> Napi::Value {
    a.expect_count(6);
    QuantizeArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.n = a.int64(4, "n", 0, INT32_MAX);
    r.k = a.int64(5, "k", 0, INT32_MAX);
    r.group = r.k;
    r.qweight = a.tensor(1, "qweight", DType::I8, r.n * r.k);
    r.scales = static_cast<float*>(a.tensor(2, "scales", DType::F32, r.n));
    r.weight = a.tensor(3, "weight", r.dtype, r.n * r.k);
    launched("quantizeInt8", launch_quantize_int8(r, stream()));
    return a.env().Undefined();
  });
}

// quantizeInt4(dtype, qweight, scales, weight, n, k, groupSize)
Napi::Value QuantizeInt4(const Napi::CallbackInfo& info) {
  return guard(info, "quantizeInt4", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    QuantizeArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.n = a.int64(4, "n", 0, INT32_MAX);
    r.k = a.int64(5, "k", 0, INT32_MAX);
    r.group = int4_group(a, 6, r.k);
    r.qweight = a.tensor(1, "qweight", DType::U8, r.n * (r.k / 2));
    r.scales = static_cast<float*>(a.tensor(2, "scales", DType::F32, r.n * (r.k / r.group)));
    r.weight = a.tensor(3, "weight", r.dtype, r.n * r.k);
    launched("quantizeInt4", launch_quantize_int4(r, stream()));
    return a.env().Undefined();
  });
}

// linearInt8(dtype, out, x, qweight, scales, bias, m, k, n)
Napi::Value LinearInt8(const Napi::CallbackInfo& info) {
  return guard(info, "linearInt8", [](const Args& a) -> Napi::Value {
    a.expect_count(9);
    QuantLinearArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.m = a.int64(6, "m", 0, 65535LL * 8);
    r.k = a.int64(7, "k", 0, INT32_MAX);
    r.n = a.int64(8, "n", 0, INT32_MAX);
    r.out = a.tensor(1, "out", r.dtype, r.m * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.m * r.k);
    r.qweight = a.tensor(3, "qweight", DType::I8, r.n * r.k);
    r.scales = static_cast<const float*>(a.tensor(4, "scales", DType::F32, r.n));
    r.bias = a.tensor(5, "bias", r.dtype, r.n, /*optional=*/true);
    launched("linearInt8", launch_linear_int8(r, stream()));
    return a.env().Undefined();
  });
}

// linearInt4(dtype, out, x, qweight, scales, bias, m, k, n, groupSize)
Napi::Value LinearInt4(const Napi::CallbackInfo& info) {
  return guard(info, "linearInt4", [](const Args& a) -> Napi::Value {
    a.expect_count(10);
    QuantLinearArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.m = a.int64(6, "m", 0, 65535LL * 8);
    r.k = a.int64(7, "k", 0, INT32_MAX);
    r.n = a.int64(8, "n", 0, INT32_MAX);
    r.group = int4_group(a, 9, r.k);
    r.out = a.tensor(1, "out", r.dtype, r.m * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.m * r.k);
    r.qweight = a.tensor(3, "qweight", DType::U8, r.n * (r.k / 2));
    r.scales = static_cast<const float*>(a.tensor(4, "scales", DType::F32, r.n * (r.k / r.group)));
    r.bias = a.tensor(5, "bias", r.dtype, r.n, /*optional=*/true);
    launched("linearInt4", launch_linear_int4(r, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_linear_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "linear", Linear);
  define(env, exports, "linearSwiglu", LinearSwiglu);
  define(env, exports, "rmsnormLinear", RmsnormLinear);
  define(env, exports, "quantizeInt8", QuantizeInt8);
  define(env, exports, "quantizeInt4", QuantizeInt4);
  define(env, exports, "linearInt8", LinearInt8);
  define(env, exports, "linearInt4", LinearInt4);
}

}  // namespace qk::binding
