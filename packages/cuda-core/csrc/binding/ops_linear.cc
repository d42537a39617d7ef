#include "args.h"
#include "registry.h"

namespace qk::binding {

void register_linear_ops(Napi::Env, Napi::Object&) {}

}  // namespace qk::binding
