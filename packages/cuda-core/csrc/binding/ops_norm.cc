// RMSNorm family bindings: argument conversion and checks only; the math is in csrc/kernels.
#include "../kernels/rmsnorm.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

// rmsnorm(dtype, out, x, weight, rows, n, eps)
Napi::Value Rmsnorm(const Napi::CallbackInfo& info) {
  return guard(info, "rmsnorm", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    RmsnormArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(4, "rows", 0, INT32_MAX);
    r.n = a.int64(5, "n", 0, INT32_MAX);
    r.eps = static_cast<float>(a.number(6, "eps"));
    r.out = a.tensor(1, "out", r.dtype, r.rows * r.n);
    r.x = a.tensor(2, "x", r.dtype, r.rows * r.n);
    r.weight = a.tensor(3, "weight", r.dtype, r.n);
    launched("rmsnorm", launch_rmsnorm(r, stream()));
    return a.env().Undefined();
  });
}

// fusedAddRmsnorm(dtype, out, residualOut, x, residual, weight, rows, n, eps)
Napi::Value FusedAddRmsnorm(const Napi::CallbackInfo& info) {
  return guard(info, "fusedAddRmsnorm", [](const Args& a) -> Napi::Value {
    a.expect_count(9);
    RmsnormArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(6, "rows", 0, INT32_MAX);
    r.n = a.int64(7, "n", 0, INT32_MAX);
    r.eps = static_cast<float>(a.number(8, "eps"));
    const int64_t count = r.rows * r.n;
    r.out = a.tensor(1, "out", r.dtype, count);
    r.residual_out = a.tensor(2, "residualOut", r.dtype, count);
    r.x = a.tensor(3, "x", r.dtype, count);
    r.residual = a.tensor(4, "residual", r.dtype, count);
    r.weight = a.tensor(5, "weight", r.dtype, r.n);
    launched("fusedAddRmsnorm", launch_rmsnorm(r, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_norm_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "rmsnorm", Rmsnorm);
  define(env, exports, "fusedAddRmsnorm", FusedAddRmsnorm);
}

}  // namespace qk::binding
