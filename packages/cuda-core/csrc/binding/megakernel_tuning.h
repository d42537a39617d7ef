// The megakernel's tuning knobs as the binding receives them: one JS object (`MegakernelTuning` of @qk/qwen3), read
// once when a plan or an instance is made. Every field is optional: an absent one keeps the default that
// ops_megakernel.cc picks (most of them the plan's choice for the model), so an empty object changes nothing.
#pragma once
#include <napi.h>

#include <cstdint>
#include <optional>

#include "args.h"

namespace qk::binding {

/** The fields of the tuning object; each is documented, with its default, on `MegakernelTuning` of @qk/qwen3. */
struct MegakernelTuning {
  std::optional<int64_t> slot_kb;
  std::optional<int64_t> inflight;
  std::optional<int64_t> lm_inflight;
  std::optional<bool> claim_tiles;
  std::optional<int64_t> skip_items;
  std::optional<bool> l2_stream;
  std::optional<bool> kv_stage;
  std::optional<int64_t> chunk_keys;
  std::optional<bool> qkv_quads;
  std::optional<bool> kv_prefetch;
  std::optional<int64_t> o_merge;
  std::optional<bool> path_kernels;
  std::optional<int64_t> staged_from;
  std::optional<int64_t> staged_until;
  std::optional<bool> staged_gate_up;
  std::optional<int64_t> staged_hf;
  std::optional<bool> staged_ring;
  std::optional<int64_t> debug;
  std::optional<int64_t> timeout_ms;
};

/**
 * `value` (undefined: every default) checked and read: it must be a plain object whose fields are all known, each
 * of its kind and in its range. A wrong one throws a TypeError naming it ("tuning.inflight").
 */
MegakernelTuning read_megakernel_tuning(const Args& a, const Napi::Value& value);

/**
 * Every field's name, kind and range, `{ [name]: { kind: 'integer', min, max } | { kind: 'boolean' } | { kind:
 * 'bits', mask } }`, frozen: the addon's `megakernelTuningFields`, which @qk/qwen3 compares with its own table before
 * the megakernel's first use.
 */
Napi::Object megakernel_tuning_fields(Napi::Env env);

}  // namespace qk::binding
