#include <napi.h>

#include "registry.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  using namespace qk::binding;
  register_runtime(env, exports);
  register_norm_ops(env, exports);
  register_elementwise_ops(env, exports);
  register_linear_ops(env, exports);
  register_attention_ops(env, exports);
  register_sampling_ops(env, exports);
  register_megakernel_ops(env, exports);
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

}  // namespace

NODE_API_MODULE(qk_cuda, Init)
