// Host planning (DESIGN.md, "Steps per launch and the host"): megakernel_plan checks a model's sizes against the
// kernel's limits and picks the ring, shares, QKV turns, LM-head screen rows and the staged attention's keys. Host
// code only, but it sets the attributes of (and checks residency for) the kernel instantiations of this translation
// unit, which have internal linkage: so it is included by qwen3_decode.cu (inside namespace qk, after the kernels)
// rather than compiled on its own; not a standalone header.
#pragma once

cudaError_t megakernel_plan(const MegakernelDims& d, MegakernelPlan* plan, const char** why, size_t slot_bytes) {
  *why = nullptr;
  auto refuse = [&](const char* reason) {
    *why = reason;
    return cudaErrorNotSupported;
  };
  {
    // The kernel is Hopper's (mbarriers, bulk copies, clusters): a multi-architecture build compiles a trapping body
    // for older GPUs, which must never be launched.
    int device = 0, major = 0;
    QK_RETURN_IF_ERROR(cudaGetDevice(&device));
    QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) return refuse("the GPU's compute capability is below 9.0; the megakernel runs on Hopper (sm_90) and newer");
  }
  if (d.hidden <= 0 || d.q_heads <= 0 || d.kv_heads <= 0 || d.ffn <= 0 || d.layers <= 0 || d.vocab <= 0)
    return refuse("every size must be positive");
  if (d.layers > kMegakernelMaxLayers) return refuse("the model has more layers than the megakernel's 40");
  if (d.q_heads % d.kv_heads != 0) return refuse("query heads must be a multiple of KV heads");
  if (d.q_heads / d.kv_heads > kMegakernelMaxGroup)
    return refuse("more than 4 query heads per KV head (Qwen3-14B and larger) are not served");
  if (d.kv_heads > kMaxKvHeads) return refuse("too many KV heads");
  if (d.hidden % 8 != 0 || d.ffn % 8 != 0) return refuse("hidden and FFN sizes must be multiples of 8");
  if (d.vocab > (1 << 24)) return refuse("a vocabulary of more than 2^24 ids is not served");
  if (d.hidden > (1 << 20) || d.ffn > (1 << 20)) return refuse("hidden and FFN sizes above 2^20 are not served");
  if (d.weight_bits != 16 && d.weight_bits != 8 && d.weight_bits != 4)
    return refuse("the projections' weights must be bf16, INT8 or INT4");
  if (d.weight_bits != 16 && d.q_heads != 2 * d.kv_heads && d.q_heads != 4 * d.kv_heads)
    return refuse("INT8 and INT4 weights are served for query groups of 2 and 4 (every dense Qwen3 from 0.6B to 8B)");
  if (d.weight_bits == 4) {
    // Every piece of a tile (codes, scales, offsets) is a bulk copy of whole 16-byte units from a 16-byte aligned
    // address, for any even number of rows: groups per row must be even (with offsets, a multiple of 4).
    const int64_t g = d.group_size;
    if (g < 8 || (g & (g - 1)) != 0) return refuse("the INT4 group size must be a power of two, 8 or more");
    const int64_t per = d.zero_points != 0 ? 4 * g : 2 * g;
    if (d.hidden % per != 0 || d.ffn % per != 0 || (d.q_heads * kD) % per != 0)
      return refuse(d.zero_points != 0
                        ? "with zero points, the hidden, FFN and attention sizes must be multiples of 4 INT4 groups"
                        : "the hidden, FFN and attention sizes must be multiples of 2 INT4 groups");
  } else if (d.zero_points != 0) {
    return refuse("zero points come with INT4 weights only");
  }
  // Ring slots: the requested size (KB multiples), at least the widest tile of one pair of outputs (two rows; two
  // gate and two up rows for gate/up), and as many as fit beside the rest of shared memory.
  // (Rows as a slot holds them: megakernel_row_bytes; the LM head's rows are bf16 whatever the projections are.)
  const int64_t row_h = megakernel_row_bytes(d, d.hidden);
  const int64_t widest = std::max({4 * row_h, 2 * megakernel_row_bytes(d, d.ffn),
                                   2 * megakernel_row_bytes(d, d.q_heads * kD), 2 * d.hidden * 2});
  size_t slot = slot_bytes == 0 ? kDefaultSlotBytes : slot_bytes;
  slot = std::max(slot, static_cast<size_t>(widest));
  slot = align_up(slot, 1024);
  const size_t fixed = fixed_smem_bytes(d);
  auto ring_slots = [&](size_t bytes) {
    return fixed < kSmemLimit ? std::min<size_t>(kMaxSlots, (kSmemLimit - fixed) / bytes) : 0;
  };
  const size_t slots = ring_slots(slot);
  if (slots < 2) return refuse("a pair of weight rows is too wide for two shared-memory ring slots");
  // The short-context ring: only with the default slot size (a requested size is a tuning knob, kept for every
  // launch) and where the default was not already widened to the model's rows.
  const size_t short_slots = slot_bytes == 0 && slot == kDefaultSlotBytes ? ring_slots(kShortSlotBytes) : 0;
  plan->short_slots = short_slots >= 2 ? static_cast<int>(short_slots) : 0;
  plan->short_slot_bytes = plan->short_slots > 0 ? kShortSlotBytes : 0;
  plan->short_until = plan->short_slots > 0 ? kShortRingUntil : 0;
  size_t smem = std::max(slots * slot, plan->short_slots * plan->short_slot_bytes) + fixed;
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  // The kernels' dynamic shared memory cap is the device's whole opt-in limit, not this plan's size: a kernel
  // function is shared by every instance of its query group (models, rings, tuning slotKb), and a later,
  // smaller plan must not lower the cap below an earlier instance's launches (cudaErrorInvalidValue).
  int dev = 0, optin = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&dev));
  QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  int per_sm = 1;
  // (every kernel of the group: a launch may run any; groups other than 2 have one path, listed twice; then, in a
  // placement-search build, the search's kernels)
#ifdef QK_MEGAKERNEL_PAD_SEARCH
  DecodeKernel kernels[8 + 2 * kPadSearchCount];
  pad_kernels(kernels + 8);
#else
  DecodeKernel kernels[8];
#endif
  for (int k = 0; k < 8; k++) kernels[k] = decode_kernel(d, (k & 1) != 0, (k & 2) != 0, k >> 2);
  int min_cap = optin;
  for (const DecodeKernel kernel : kernels) {
    cudaFuncAttributes attr{};
    QK_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    // (the kernel's static shared memory counts too)
    min_cap = std::min(min_cap, optin - static_cast<int>(attr.sharedSizeBytes));
  }
  // The staged attention over the whole ring (query groups of 2): as many keys as fit in the ring's place and what
  // the kernels' shared memory leaves beside it.
  plan->staged_ring_keys = 0;
  if (d.q_heads == 2 * d.kv_heads && min_cap > 0 && fixed < static_cast<size_t>(min_cap)) {
    const int64_t room = static_cast<int64_t>(static_cast<size_t>(min_cap) - fixed);
    const int64_t keys = room / megakernel_staged_bytes(1) / 16 * 16;
    plan->staged_ring_keys = static_cast<int>(std::min<int64_t>(keys, kMegakernelStagedMaxKeys));
    smem = std::max(smem, static_cast<size_t>(megakernel_staged_bytes(plan->staged_ring_keys)) + fixed);
  }
  for (const DecodeKernel kernel : kernels) {
    cudaFuncAttributes attr{};
    QK_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    const int cap = optin - static_cast<int>(attr.sharedSizeBytes);  // (the kernel's static shared memory counts too)
    if (cap <= 0 || smem > static_cast<size_t>(cap)) {
      *why = "the kernel needs more shared memory per block than this GPU offers";
      return cudaErrorInvalidConfiguration;
    }
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cap));
    int n = 0;
    QK_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem));
    per_sm = std::min(per_sm, n);
  }
  if (per_sm < 1) {
    *why = "one block per SM cannot be resident (shared memory or registers)";
    return cudaErrorInvalidConfiguration;
  }
  plan->grid = sms;
  plan->threads = kThreads;
  plan->smem_bytes = smem;
  plan->slots = static_cast<int>(slots);
  plan->slot_bytes = slot;
  // Claimed tiles balance the blocks when each has many tiles per stage; with few (0.6B: about 2 per QKV stage), the
  // claims' round trips cost more than the balance gains (on an H100: 8B 167.7 → 174.7 tok/s, 0.6B 1,168 → 824).
  const double layer_bytes =
      static_cast<double>((d.q_heads + 2 * d.kv_heads) * kD + 2 * d.ffn) * megakernel_row_bytes(d, d.hidden) +
      static_cast<double>(d.hidden) *
          (megakernel_row_bytes(d, d.q_heads * kD) + megakernel_row_bytes(d, d.ffn));
  plan->claim = layer_bytes / sms >= kClaimBytesPerBlock;
  // QKV in four-row turns where every ring's tiles hold at least four pairs (Qwen3-0.6B); with fewer, a turn of four
  // would mostly read a lone pair twice.
  plan->qkv_quads = tile_units_for(row_h, 1, static_cast<int64_t>(slot)) >= 8 &&
                    (plan->short_slots == 0 || tile_units_for(row_h, 1, static_cast<int64_t>(kShortSlotBytes)) >= 8);
  plan->max_chunks = static_cast<int>(sms / d.kv_heads) > 0 ? static_cast<int>(sms / d.kv_heads) : 1;
  // The O blocks merge heads of up to kMegakernelOMergeMax chunks where the query group is 2 (Qwen3-0.6B, 1.7B; in a
  // group of 1 the gather spilled), the chunks' records fit one batch of loads per consumer thread, and x and the
  // staged records fit the union (stage_merge_input).
  plan->o_merge = 0;
  for (int n = 2; n <= kMegakernelOMergeMax && d.q_heads == 2 * d.kv_heads; n++) {
    const int64_t units = n * static_cast<int64_t>(omerge_record_words(static_cast<int>(d.q_heads))) / 2;
    if (units <= kOMergeBatch * kConsumers && d.q_heads * kD * 2 + units * 8 <= static_cast<int64_t>(union_bytes(d)))
      plan->o_merge = n;
  }
  // Up to half the grid attends without QKV or O rows on models that take fixed shares (0.6B: up to 8 chunks per KV
  // head; a quarter measured 20-35 µs per token slower at positions 224-447); a quarter on models that claim tiles,
  // where the others' bandwidth is the limit.
  plan->skip_items = plan->claim ? sms / 4 : sms / 2;
  // Launches may screen the LM head (MegakernelArgs::lm_screen) where the block's rows are a fixed share
  // (consume_screen keeps a bound per row, after x and its int16 copy in the union, then the warps' lists of lower
  // bounds for sampling, a masked launch's words and, with penalties, the words of the ids seen) and rows are 16-byte
  // pieces.
  const int64_t share = 2 * (((d.vocab + 1) / 2 + sms - 1) / sms);
  const int64_t screen_union = 4 * d.hidden + 4 * (share + 1) + static_cast<int64_t>(kConsumerWarps) * kMaxTopK * 8 +
                               2 * 4 * screen_mask_words(share);
  plan->screen_rows = !plan->claim && d.hidden % 16 == 0 && screen_union <= static_cast<int64_t>(union_bytes(d))
                          ? static_cast<int>(share)
                          : 0;
  if (sms < d.kv_heads) return refuse("the GPU has fewer SMs than the model has KV heads");
  plan->workspace_bytes = workspace_layout(d, sms, plan->max_chunks).total;
  return cudaSuccess;
}
