#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/** Unary ops; the codes match `UnaryOp` in src/binding.ts. */
enum class UnaryOp : int32_t { Silu = 0, Gelu = 1, GeluTanh = 2, Square = 3, RsqrtAddScalar = 4, Copy = 5 };
constexpr int32_t kUnaryOpCount = 6;

/** Binary ops; the codes match `BinaryOp` in src/binding.ts. */
enum class BinaryOp : int32_t { Add = 0, Mul = 1 };
constexpr int32_t kBinaryOpCount = 2;

/** How `b` broadcasts against `a` (`[rows, n]`); the codes match `Broadcast` in src/binding.ts. */
enum class Broadcast : int32_t { None = 0, PerRow = 1, PerColumn = 2 };
constexpr int32_t kBroadcastCount = 3;

/**
 * out[i] = op(x[i], alpha) for i < count, read as `dtype_in` and written as `dtype_out`, computed in float32 and
 * rounded once. silu: x·σ(x); gelu: x/2·erfc(−x/√2) (exact, erf form); geluTanh: x·σ(2·√(2/π)(x + 0.044715x³))
 * (= the tanh form without its cancellation); square: x²; rsqrtAddScalar: 1/√(x + alpha); copy: x (a cast).
 * `out` may alias `x` element for element when both dtypes have one size.
 */
struct UnaryArgs {
  DType dtype_in;
  DType dtype_out;
  UnaryOp op;
  void* out;
  const void* x;
  int64_t count;
  float alpha;
};

cudaError_t launch_unary(const UnaryArgs& args, cudaStream_t stream);

/**
 * out[r, i] = a[r, i] (op) b[·] over `[rows, n]`, each operand with its own float dtype, computed in float32 and
 * rounded once. `b` is `[rows, n]` (none), `[rows]` (perRow: b[r]) or `[n]` (perColumn: b[i]).
 * `out` may alias `a` (or a non-broadcast `b`) element for element when the dtypes have one size.
 */
struct BinaryArgs {
  DType dtype_out;
  BinaryOp op;
  void* out;
  DType dtype_a;
  const void* a;
  DType dtype_b;
  const void* b;
  int64_t rows;
  int64_t n;
  Broadcast broadcast;
};

cudaError_t launch_binary(const BinaryArgs& args, cudaStream_t stream);

/** out[r] = mean(x[r, 0:n]) in float32 (`out` is f32 `[rows]`), the eager-mode `mean(-1)` of a float32 tensor. */
struct RowMeanArgs {
  DType dtype_in;
  float* out;
  const void* x;
  int64_t rows;
  int64_t n;
};

cudaError_t launch_row_mean(const RowMeanArgs& args, cudaStream_t stream);

/**
 * Blocks for a grid-stride launch of `threads`-thread blocks covering `work_blocks` blocks of work: at most the
 * number of blocks the current device keeps resident at once (a few waves of every SM), at least 1. Shared by the
 * elementwise-family launchers (elementwise, rope, swiglu, embedding).
 */
cudaError_t grid_stride_blocks(int64_t work_blocks, int threads, unsigned* blocks);

}  // namespace qk
