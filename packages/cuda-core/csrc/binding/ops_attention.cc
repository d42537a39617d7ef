#include "args.h"
#include "registry.h"

namespace qk::binding {

void register_attention_ops(Napi::Env, Napi::Object&) {}

}  // namespace qk::binding
