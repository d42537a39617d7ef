// One registration function per binding file; addon.cc calls them all. Each op family lives in its own file.
#pragma once
#include <napi.h>

namespace qk::binding {
void register_runtime(Napi::Env env, Napi::Object& exports);
void register_norm_ops(Napi::Env env, Napi::Object& exports);         // ops_norm.cc
void register_elementwise_ops(Napi::Env env, Napi::Object& exports);  // ops_elementwise.cc
void register_linear_ops(Napi::Env env, Napi::Object& exports);       // ops_linear.cc
void register_attention_ops(Napi::Env env, Napi::Object& exports);    // ops_attention.cc
void register_sampling_ops(Napi::Env env, Napi::Object& exports);     // ops_sampling.cc
void register_megakernel_ops(Napi::Env env, Napi::Object& exports);   // ops_megakernel.cc
}  // namespace qk::binding
