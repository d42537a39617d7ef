// Reads and checks the megakernel's tuning object (megakernel_tuning.h). One table holds every field's name, kind and
// range: the reader walks it, and the addon exports it so that @qk/ops can check its copy against it at load.
#include "megakernel_tuning.h"

#include <cstdint>
#include <string>

#include "../megakernel/qwen3_decode.h"

namespace qk::binding {
namespace {

enum class Kind { Integer, Boolean, Bits };

struct Field {
  const char* name;
  Kind kind;
  int64_t min;  // Integer: the range; Bits: max is the mask of the bits allowed
  int64_t max;
  std::optional<int64_t> MegakernelTuning::*integer;  // Integer and Bits fields
  std::optional<bool> MegakernelTuning::*boolean;     // Boolean fields
};

constexpr Field integer(const char* name, int64_t min, int64_t max, std::optional<int64_t> MegakernelTuning::*m) {
  return {name, Kind::Integer, min, max, m, nullptr};
}
constexpr Field boolean(const char* name, std::optional<bool> MegakernelTuning::*m) {
  return {name, Kind::Boolean, 0, 1, nullptr, m};
}
constexpr Field bits(const char* name, int64_t mask, std::optional<int64_t> MegakernelTuning::*m) {
  return {name, Kind::Bits, 0, mask, m, nullptr};
}

// The ranges are the bounds the knobs were clamped to before they became fields: 227 KB is the most shared memory
// a Hopper block can opt into; 1,024 copies in flight, 4,096 attention items and 2^20 keys per chunk lie far past
// any plan (bounds against overflow, not advice); the O merge and the staged keys stop where the kernel's do.
constexpr Field kFields[] = {
    integer("slotKb", 0, 227, &MegakernelTuning::slot_kb),
    integer("inflight", 0, 1024, &MegakernelTuning::inflight),
    integer("lmInflight", 0, 1024, &MegakernelTuning::lm_inflight),
    boolean("claimTiles", &MegakernelTuning::claim_tiles),
    integer("skipItems", 0, 4096, &MegakernelTuning::skip_items),
    boolean("l2Stream", &MegakernelTuning::l2_stream),
    boolean("kvStage", &MegakernelTuning::kv_stage),
    integer("chunkKeys", 0, 1 << 20, &MegakernelTuning::chunk_keys),
    boolean("qkvQuads", &MegakernelTuning::qkv_quads),
    boolean("kvPrefetch", &MegakernelTuning::kv_prefetch),
    integer("oMerge", 0, kMegakernelOMergeMax, &MegakernelTuning::o_merge),
    boolean("pathKernels", &MegakernelTuning::path_kernels),
    integer("stagedFrom", 0, INT32_MAX, &MegakernelTuning::staged_from),
    integer("stagedUntil", 0, kMegakernelStagedMaxKeys, &MegakernelTuning::staged_until),
    boolean("stagedGateUp", &MegakernelTuning::staged_gate_up),
    integer("stagedHf", 0, 2, &MegakernelTuning::staged_hf),
    boolean("stagedRing", &MegakernelTuning::staged_ring),
    bits("debug", kMegakernelDebugBits, &MegakernelTuning::debug),
    integer("timeoutMs", 1, 86400000, &MegakernelTuning::timeout_ms),
};

const Field* find_field(const std::string& name) {
  for (const Field& f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

std::string known_fields() {
  std::string list;
  for (const Field& f : kFields) list += (list.empty() ? "" : ", ") + std::string(f.name);
  return list;
}

/** An integral JS number, or the failure naming `arg`. */
int64_t whole_number(const Args& a, const std::string& arg, const Napi::Value& v, const std::string& wanted) {
  if (!v.IsNumber()) a.fail(arg, "must be " + wanted);
  const double d = v.As<Napi::Number>().DoubleValue();
  // (the range check on the double first: a cast of a value outside int64 is undefined)
  if (!(d >= -9.0e18 && d <= 9.0e18) || d != static_cast<double>(static_cast<int64_t>(d)))
    a.fail(arg, "must be " + wanted + ", got " + v.ToString().Utf8Value());
  return static_cast<int64_t>(d);
}

}  // namespace

MegakernelTuning read_megakernel_tuning(const Args& a, const Napi::Value& value) {
  MegakernelTuning t{};
  if (value.IsUndefined()) return t;
  if (!value.IsObject() || value.IsArray() || value.IsFunction())
    a.fail("tuning", "must be an object of megakernel tuning fields (MegakernelTuning)");
  const Napi::Object o = value.As<Napi::Object>();
  const Napi::Array names = o.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); i++) {
    const std::string name = names.Get(i).ToString().Utf8Value();
    if (find_field(name) == nullptr)
      a.fail("tuning." + name, "is not a megakernel tuning field (known: " + known_fields() + ")");
  }
  for (const Field& f : kFields) {
    const Napi::Value v = o.Get(f.name);
    if (v.IsUndefined()) continue;
    const std::string arg = std::string("tuning.") + f.name;
    switch (f.kind) {
      case Kind::Boolean:
        if (!v.IsBoolean()) a.fail(arg, "must be a boolean");
        t.*f.boolean = v.As<Napi::Boolean>().Value();
        break;
      case Kind::Integer: {
        const std::string wanted = "an integer in [" + std::to_string(f.min) + ", " + std::to_string(f.max) + "]";
        const int64_t x = whole_number(a, arg, v, wanted);
        if (x < f.min || x > f.max) a.fail(arg, "must be " + wanted + ", got " + std::to_string(x));
        t.*f.integer = x;
        break;
      }
      case Kind::Bits: {
        const std::string wanted = "a non-negative integer of the bits in " + std::to_string(f.max);
        const int64_t x = whole_number(a, arg, v, wanted);
        if (x < 0 || (x & ~f.max) != 0) a.fail(arg, "must be " + wanted + ", got " + std::to_string(x));
        t.*f.integer = x;
        break;
      }
    }
  }
  return t;
}

Napi::Object megakernel_tuning_fields(Napi::Env env) {
  Napi::Object fields = Napi::Object::New(env);
  for (const Field& f : kFields) {
    Napi::Object d = Napi::Object::New(env);
    switch (f.kind) {
      case Kind::Boolean:
        d.Set("kind", "boolean");
        break;
      case Kind::Integer:
        d.Set("kind", "integer");
        d.Set("min", static_cast<double>(f.min));
        d.Set("max", static_cast<double>(f.max));
        break;
      case Kind::Bits:
        d.Set("kind", "bits");
        d.Set("mask", static_cast<double>(f.max));
        break;
    }
    d.Freeze();
    fields.Set(f.name, d);
  }
  fields.Freeze();
  return fields;
}

}  // namespace qk::binding
