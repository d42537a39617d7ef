// Tensor-core prefill attention (bf16/f16): entry points used by launch_attention_prefill's dispatch.
#pragma once
#include <cuda_runtime.h>

#include "attention_prefill.h"

namespace qk {

/** True when a tensor-core kernel covers these arguments (bf16/f16, head_dim 64/128/256, device sm_80+). */
bool attention_prefill_tc_supported(const AttentionPrefillArgs& args);

/** Launches the tensor-core prefill (wgmma on compute capability 9.0, mma.sync elsewhere). Arguments already
 * validated by launch_attention_prefill and accepted by attention_prefill_tc_supported. */
cudaError_t launch_attention_prefill_tc(const AttentionPrefillArgs& args, cudaStream_t stream);

}  // namespace qk
