// Elementwise, RoPE, SwiGLU and embedding bindings: argument conversion and checks only; the math is in
// csrc/kernels (elementwise.cu, rope.cu, swiglu.cu, embedding.cu).
#include "../kernels/elementwise.h"
#include "../kernels/embedding.h"
#include "../kernels/finite.h"
#include "../kernels/rope.h"
#include "../kernels/swiglu.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

// Extents: element counts stay below 2^53 (exact in a JS number); each extent below 2^31 so products of two fit
// easily in 64 bits, counts of one op up to 2^53.
constexpr int64_t kMaxCount = (int64_t{1} << 53) - 1;

// unary(dtypeIn, dtypeOut, op, out, x, count, alpha)
Napi::Value Unary(const Napi::CallbackInfo& info) {
  return guard(info, "unary", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    UnaryArgs u{};
    u.dtype_in = a.float_dtype(0, "dtypeIn");
    u.dtype_out = a.float_dtype(1, "dtypeOut");
    u.op = static_cast<UnaryOp>(a.int64(2, "op", 0, kUnaryOpCount - 1));
    u.count = a.int64(5, "count", 0, kMaxCount);
    u.alpha = static_cast<float>(a.number(6, "alpha"));
    u.out = a.tensor(3, "out", u.dtype_out, u.count);
    u.x = a.tensor(4, "x", u.dtype_in, u.count);
    launched("unary", launch_unary(u, stream()));
    return a.env().Undefined();
  });
}

// binary(dtypeOut, op, out, dtypeA, a, dtypeB, b, rows, n, broadcast)
Napi::Value Binary(const Napi::CallbackInfo& info) {
  return guard(info, "binary", [](const Args& a) -> Napi::Value {
    a.expect_count(10);
    BinaryArgs b{};
    b.dtype_out = a.float_dtype(0, "dtypeOut");
    b.op = static_cast<BinaryOp>(a.int64(1, "op", 0, kBinaryOpCount - 1));
    b.dtype_a = a.float_dtype(3, "dtypeA");
    b.dtype_b = a.float_dtype(5, "dtypeB");
    b.rows = a.int64(7, "rows", 0, INT32_MAX);
    b.n = a.int64(8, "n", 0, INT32_MAX);
    b.broadcast = static_cast<Broadcast>(a.int64(9, "broadcast", 0, kBroadcastCount - 1));
    const int64_t count = b.rows * b.n;
    const int64_t b_count = b.broadcast == Broadcast::None ? count : (b.broadcast == Broadcast::PerRow ? b.rows : b.n);
    b.out = a.tensor(2, "out", b.dtype_out, count);
    b.a = a.tensor(4, "a", b.dtype_a, count);
    b.b = a.tensor(6, "b", b.dtype_b, b_count);
    launched("binary", launch_binary(b, stream()));
    return a.env().Undefined();
  });
}

// rowMean(dtypeIn, out, x, rows, n)
Napi::Value RowMean(const Napi::CallbackInfo& info) {
  return guard(info, "rowMean", [](const Args& a) -> Napi::Value {
    a.expect_count(5);
    RowMeanArgs r{};
    r.dtype_in = a.float_dtype(0, "dtypeIn");
    r.rows = a.int64(3, "rows", 0, INT32_MAX);
    r.n = a.int64(4, "n", 1, INT32_MAX);
    r.out = static_cast<float*>(a.tensor(1, "out", DType::F32, r.rows));
    r.x = a.tensor(2, "x", r.dtype_in, r.rows * r.n);
    launched("rowMean", launch_row_mean(r, stream()));
    return a.env().Undefined();
  });
}

// findNonFinite(dtype, out, x, count): out is i32[4], read as two u64 (count of NaN/±Inf elements, index of the first)
Napi::Value FindNonFinite(const Napi::CallbackInfo& info) {
  return guard(info, "findNonFinite", [](const Args& a) -> Napi::Value {
    a.expect_count(4);
    const DType dtype = a.float_dtype(0, "dtype");
    const int64_t count = a.int64(3, "count", 0, kMaxCount);
    auto* stats = static_cast<unsigned long long*>(a.tensor(1, "out", DType::I32, 4));
    if ((reinterpret_cast<uintptr_t>(stats) & 7) != 0) a.fail("out", "must be 8-byte aligned (it is read as two u64)");
    const void* x = a.tensor(2, "x", dtype, count);
    launched("findNonFinite", launch_find_non_finite(dtype, x, count, stats, stream()));
    return a.env().Undefined();
  });
}

/** Extents shared by rope and qkNormRope: tokens, heads, headDim (even) at argument indices i, i+1, i+2. */
void rope_extents(const Args& a, size_t i, RopeArgs& r) {
  r.tokens = a.int64(i, "tokens", 0, INT32_MAX);
  r.heads = a.int64(i + 1, "heads", 0, INT32_MAX);
  r.head_dim = a.int64(i + 2, "headDim", 0, INT32_MAX - 1);
  if (r.head_dim % 2 != 0) a.fail("headDim", "must be even (rotate-half pairs), got " + std::to_string(r.head_dim));
  // tokens·heads < 2^62; the element count must also stay below 2^53.
  const int64_t rows = r.tokens * r.heads;
  if (r.head_dim != 0 && rows > kMaxCount / r.head_dim) {
    a.fail("headDim", "gives tokens·heads·headDim above 2^53 elements");
  }
}

// rope(dtype, out, x, positions, invFreq, tokens, heads, headDim)
Napi::Value Rope(const Napi::CallbackInfo& info) {
  return guard(info, "rope", [](const Args& a) -> Napi::Value {
    a.expect_count(8);
    RopeArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    rope_extents(a, 5, r);
    const int64_t count = r.tokens * r.heads * r.head_dim;
    r.out = a.tensor(1, "out", r.dtype, count);
    r.x = a.tensor(2, "x", r.dtype, count);
    r.positions = static_cast<const int32_t*>(a.tensor(3, "positions", DType::I32, r.tokens));
    r.inv_freq = static_cast<const float*>(a.tensor(4, "invFreq", DType::F32, r.head_dim / 2));
    r.weight = nullptr;
    launched("rope", launch_rope(r, stream()));
    return a.env().Undefined();
  });
}

// qkNormRope(dtype, out, x, weight, positions, invFreq, tokens, heads, headDim, eps)
Napi::Value QkNormRope(const Napi::CallbackInfo& info) {
  return guard(info, "qkNormRope", [](const Args& a) -> Napi::Value {
    a.expect_count(10);
    RopeArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    rope_extents(a, 6, r);
    r.eps = static_cast<float>(a.number(9, "eps"));
    const int64_t count = r.tokens * r.heads * r.head_dim;
    r.out = a.tensor(1, "out", r.dtype, count);
    r.x = a.tensor(2, "x", r.dtype, count);
    r.weight = a.tensor(3, "weight", r.dtype, r.head_dim);
    r.positions = static_cast<const int32_t*>(a.tensor(4, "positions", DType::I32, r.tokens));
    r.inv_freq = static_cast<const float*>(a.tensor(5, "invFreq", DType::F32, r.head_dim / 2));
    launched("qkNormRope", launch_rope(r, stream()));
    return a.env().Undefined();
  });
}

// qkNormRopeAppend(dtype, qOut, kCache, vCache, qkv, qWeight, kWeight, positions, invFreq, tokens, qHeads, kvHeads,
//                  headDim, cacheRows, eps)
Napi::Value QkNormRopeAppend(const Napi::CallbackInfo& info) {
  return guard(info, "qkNormRopeAppend", [](const Args& a) -> Napi::Value {
    a.expect_count(15);
    QkNormRopeAppendArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.tokens = a.int64(9, "tokens", 0, INT32_MAX);
    r.q_heads = a.int64(10, "qHeads", 0, INT32_MAX / 4);
    r.kv_heads = a.int64(11, "kvHeads", 0, INT32_MAX / 4);
    r.head_dim = a.int64(12, "headDim", 2, kRopeAppendMaxHeadDim);
    if (r.head_dim % 2 != 0) a.fail("headDim", "must be even (rotate-half pairs), got " + std::to_string(r.head_dim));
    r.cache_rows = a.int64(13, "cacheRows", 0, INT32_MAX);
    r.eps = static_cast<float>(a.number(14, "eps"));
    const int64_t heads = r.q_heads + 2 * r.kv_heads;
    if (r.tokens * heads > kMaxCount / r.head_dim) a.fail("tokens", "gives more than 2^53 elements of qkv");
    r.q_out = a.tensor(1, "qOut", r.dtype, r.tokens * r.q_heads * r.head_dim);
    r.k_cache = a.tensor(2, "kCache", r.dtype, r.cache_rows * r.kv_heads * r.head_dim);
    r.v_cache = a.tensor(3, "vCache", r.dtype, r.cache_rows * r.kv_heads * r.head_dim);
    r.qkv = a.tensor(4, "qkv", r.dtype, r.tokens * heads * r.head_dim);
    r.q_weight = a.tensor(5, "qWeight", r.dtype, r.head_dim);
    r.k_weight = a.tensor(6, "kWeight", r.dtype, r.head_dim);
    r.positions = static_cast<const int32_t*>(a.tensor(7, "positions", DType::I32, r.tokens));
    r.inv_freq = static_cast<const float*>(a.tensor(8, "invFreq", DType::F32, r.head_dim / 2));
    launched("qkNormRopeAppend", launch_qk_norm_rope_append(r, stream()));
    return a.env().Undefined();
  });
}

// swiglu(dtype, out, gate, up, rows, ffn, inStride)
Napi::Value Swiglu(const Napi::CallbackInfo& info) {
  return guard(info, "swiglu", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    SwigluArgs s{};
    s.dtype = a.float_dtype(0, "dtype");
    s.rows = a.int64(4, "rows", 0, INT32_MAX);
    s.ffn = a.int64(5, "ffn", 0, INT32_MAX);
    s.in_stride = a.int64(6, "inStride", s.ffn, INT32_MAX);
    // gate and up: rows of ffn elements, in_stride apart (the last row needs only ffn).
    const int64_t in_count = s.rows == 0 ? 0 : (s.rows - 1) * s.in_stride + s.ffn;
    s.out = a.tensor(1, "out", s.dtype, s.rows * s.ffn);
    s.gate = a.tensor(2, "gate", s.dtype, in_count);
    s.up = a.tensor(3, "up", s.dtype, in_count);
    launched("swiglu", launch_swiglu(s, stream()));
    return a.env().Undefined();
  });
}

// embedding(dtype, out, ids, table, count, vocab, hidden)
Napi::Value Embedding(const Napi::CallbackInfo& info) {
  return guard(info, "embedding", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    EmbeddingArgs e{};
    e.dtype = a.float_dtype(0, "dtype");
    e.count = a.int64(4, "count", 0, INT32_MAX);
    e.vocab = a.int64(5, "vocab", 0, INT32_MAX);
    e.hidden = a.int64(6, "hidden", 0, INT32_MAX);
    e.out = a.tensor(1, "out", e.dtype, e.count * e.hidden);
    e.ids = static_cast<const int32_t*>(a.tensor(2, "ids", DType::I32, e.count));
    e.table = a.tensor(3, "table", e.dtype, e.vocab * e.hidden);
    e.scatter = false;
    launched("embedding", launch_embedding(e, stream()));
    return a.env().Undefined();
  });
}

// scatterRows(dtype, dst, index, src, count, dstRows, rowElems): dst[index[i], :] = src[i, :]
Napi::Value ScatterRows(const Napi::CallbackInfo& info) {
  return guard(info, "scatterRows", [](const Args& a) -> Napi::Value {
    a.expect_count(7);
    EmbeddingArgs e{};
    e.dtype = a.float_dtype(0, "dtype");
    e.count = a.int64(4, "count", 0, INT32_MAX);
    e.vocab = a.int64(5, "dstRows", 0, INT32_MAX);
    e.hidden = a.int64(6, "rowElems", 0, INT32_MAX);
    e.out = a.tensor(1, "dst", e.dtype, e.vocab * e.hidden);
    e.ids = static_cast<const int32_t*>(a.tensor(2, "index", DType::I32, e.count));
    e.table = a.tensor(3, "src", e.dtype, e.count * e.hidden);
    e.scatter = true;
    launched("scatterRows", launch_embedding(e, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_elementwise_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "unary", Unary);
  define(env, exports, "binary", Binary);
  define(env, exports, "rowMean", RowMean);
  define(env, exports, "findNonFinite", FindNonFinite);
  define(env, exports, "rope", Rope);
  define(env, exports, "qkNormRope", QkNormRope);
  define(env, exports, "qkNormRopeAppend", QkNormRopeAppend);
  define(env, exports, "swiglu", Swiglu);
  define(env, exports, "embedding", Embedding);
  define(env, exports, "scatterRows", ScatterRows);
}

}  // namespace qk::binding
