// The Qwen3 decode megakernel: whole batch-1 decode steps (embedding row, every layer, final norm, LM head, argmax
// or a top-k sample) in one persistent, non-cooperative kernel; one launch runs 1…64 steps, each step's token
// feeding the next on the device.
//
// Shape of a launch: one block per SM, all resident (checked with the occupancy API before the first launch).
// Each block has 7 consumer warps that compute and one producer warp that streams weights. Every weight matrix is
// cut by row pairs into one contiguous slice per block, and each slice into tiles of at most one shared-memory slot
// (a run-time size, 20 KB by default, at least a pair of the widest rows; launches that start at short contexts may
// take fewer, larger slots: MegakernelPlan::short_until). The producer walks the block's slices of
// every step in order (QKV, O, gate/up, down of each layer, then the LM head) and copies each tile into the ring of
// slots with TMA bulk copies (16-byte aligned, L1 bypassed), completing on the slot's "full" mbarrier, with at most
// `inflight` copies outstanding (more bytes in flight make every L2 round trip of the other stages slower).
// Weights do not depend on activations, so the producer runs ahead of the consumers by the whole ring, across
// stages, layers and steps: while the blocks wait for each other's outputs, HBM keeps streaming the next weights.
//
// Synchronisation between blocks has no grid barrier and no arrival counter on the data path. Every activation a
// stage hands to other blocks is written in "flagged words": 8 bytes holding two bf16 values and the step's epoch,
// stored with one 8-byte store (single-copy atomic). A reader spins on the words it needs until each carries this
// step's epoch, so one L2 round trip both waits for and delivers the data, and a block waits only for the values
// it reads (attention blocks for their own heads' q/k/v; nobody else for them). Each layer and stage has its own
// buffer, written once per step; no block starts a step before every block has finished the previous one (they all
// wait for its token), so nothing is overwritten while another block may still read it, and no buffer needs
// clearing (epochs never repeat: the epoch tells this step's words from older ones).
//
// Stages of a layer:
//   1. QKV: RMSNorm of the residual recomputed by every block, then the block's QKV rows.
//   2. Attention: work items (KV head, chunk of positions). The block of an item waits for its group's q (and,
//      where its chunk holds the new position, k and v), QK-norms and RoPEs them, appends the new key and value to
//      the cache, and attends. Chunks of one head are merged in fixed chunk order (the same bits every run): up to
//      kFlagMergeMax chunks by chunk 0's block, from flagged records as they land; more by whichever block
//      finishes last (after a fence and an arrival counter per layer and KV head). (A knob, MegakernelArgs::o_merge,
//      has the O blocks merge heads of 2-3 chunks as they gather their input instead: 30-68 µs per token slower;
//      DESIGN.md, "Attention by chunks".)
//      (By default, in query groups of 2 with fixed shares (Qwen3-0.6B and 1.7B), steps of 57-384 keys attend with
//      one block per KV head over the head's rows copied into its shared memory, on the tensor cores, each warp
//      taking its key tiles from the scores to its share of the output: attend_staged, MegakernelArgs::staged_keys,
//      DESIGN.md, "The staged attention". A launch whose steps all attend so runs a kernel compiled without the
//      attention by chunks: a third less code, 5-8 µs per token faster; AttnPath.)
//   3. O projection, residual add in the epilogue (from the block's own copy of the residual it normalised).
//   4. RMSNorm (recomputed per block) + gate/up rows of the block's FFN units, SwiGLU in the epilogue.
//   5. Down projection, residual add in the epilogue.
// Then the final RMSNorm and the LM head rows, each block keeping its best logit (or, when sampling, each warp its k
// best, merged per block; launches with a screen stream the LM head's int8 copy instead and recompute in bf16 only the
// rows that can hold the block's best or k best: consume_screen); the last block to arrive reduces the blocks' bests
// (or merges their k best and draws from them by `sample`'s rule, with the step's uniform) and publishes the token: to
// the other blocks (the next step's embedding row) and to pinned host memory, where the host reads it while the kernel
// goes on. The last step also leaves the state for the next launch. Rounding follows the layered engine (and HF): every
// projection output, norm output, SwiGLU output and residual sum is rounded to bf16 once.
//
// Every wait (flagged words, the token, mbarriers) is bounded by `timeout_ns`: a block that times out records an
// error code (also in the host error word) and an abort flag that the other blocks see, and the kernel returns; JS
// gets an error, never a hung process.
//
// DESIGN.md, beside this file, gives what bounds a step, the measurements behind these choices, and what was tried and
// dropped.
//
// This file is the megakernel's one translation unit: it holds the kernel, its instantiations and the launch; the
// parts it is built from are headers beside it, included below in dependency order inside namespace
// qk::{anonymous} (DESIGN.md, "Code placement", has the file map):
//   layout.cuh             constants, the workspace and shared-memory layout, the block's shared state (Block)
//   ptx.cuh                PTX wrappers: mbarriers, bulk copies, volatile-asm loads, bf16 conversions, dot8
//   sync.cuh               flagged words, failures and bounded waits, gathers, trace stamps, the end of a step
//   inputs.cuh             a stage's input x: RMSNorm, copied and merged inputs
//   ring.cuh               stage shapes and shares, the ring position, the producer warp
//   sampling.cuh           the warps' top-k candidates, the end of a sampled step (the draw)
//   lm_head.cuh            the argmax, the int8 screen of the LM head (consume_screen)
//   gemv.cuh               the GEMV consumer of every stage (QKV, O, gate/up, down, the unscreened LM head)
//   qkv.cuh                the attention's inputs: q/k/v gathered, QK-norm, RoPE, the KV append
//   attention_staged.cuh   the staged attention (tensor cores)
//   attention_chunked.cuh  the attention by chunks, the placement padding, the KV prefetch knob
//   attention.cuh          the attention paths (AttnPath) and the per-step choice between them
// then, after the kernel: pad_search.cuh (the placement-search build's kernels, QK_MEGAKERNEL_PAD_SEARCH only),
// plan.cuh (megakernel_plan, host) and screen_build.cuh (the screen's build kernel).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/mma.cuh"
#include "../common/numeric.cuh"
#include "../common/sampling_rule.cuh"
#include "../common/weight_div.cuh"
#include "qwen3_decode.h"

namespace qk {
namespace {

using bf16 = __nv_bfloat16;

#include "layout.cuh"
#include "ptx.cuh"
#include "sync.cuh"
#include "inputs.cuh"
#include "ring.cuh"
#include "sampling.cuh"
#include "lm_head.cuh"
#include "gemv.cuh"
#include "qkv.cuh"
#include "attention_staged.cuh"
#include "attention_chunked.cuh"
#include "attention.cuh"

// ---------------------------------------------------------------------------------------------------------------
// The kernel

/**
 * The kernel; kSample: the steps sample (a.top_k > 0), else they take the argmax; G: query heads per KV head (the
 * model's, checked by the plan); kScreen: the LM head is screened (a.lm_screen, consume_screen). One
 * instantiation per combination, so that each carries only the code it runs: the argmax kernel no sampling code (with
 * it, greedy steps measured 2–3% slower), each kernel one attention (with all four group sizes in one kernel, its
 * code was 333 KB and 231 registers), and the unscreened argmax kernel no screen (with it, 10 µs per token slower at
 * Qwen3-0.6B positions 1-1024). DESIGN.md, "Shape of a launch".
 */
template <bool kSample, int G, bool kScreen, int kPath, int kPad = -1, bool kQuant = false>
__global__ void __launch_bounds__(kThreads, 1) qwen3_decode_kernel(const __grid_constant__ MegakernelArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Hopper's mbarriers and bulk copies do not exist before sm_90: a multi-architecture build (the prebuilt addon)
  // gets a body that traps there, and the plan refuses such GPUs, so it is never launched.
  __trap();
#else
  extern __shared__ __align__(128) uint8_t smem[];
  const MegakernelDims& d = a.dims;
  Block b;
  b.slots = smem;
  const size_t ring = ring_region_bytes(a);
  b.x = reinterpret_cast<bf16*>(smem + ring);
  b.scratch = reinterpret_cast<float*>(b.x);
  b.qkv_in = reinterpret_cast<bf16*>(b.scratch + kAttnScratchFloats);
  b.res = reinterpret_cast<bf16*>(smem + ring + union_bytes(d));
  uint8_t* misc = reinterpret_cast<uint8_t*>(b.res) + residual_bytes(d);
  b.full = reinterpret_cast<uint64_t*>(misc);
  b.empty = b.full + kMaxSlots;
  b.desc = reinterpret_cast<uint2*>(b.empty + kMaxSlots);
  b.red = reinterpret_cast<float*>(b.desc + kMaxSlots);
  b.flag = reinterpret_cast<int*>(b.red + kMaxG * kConsumerWarps);
  b.sync = static_cast<unsigned*>(a.workspace);
  b.result = a.result;
  b.timeout_ns = a.timeout_ns;
  b.host = a.host;
  b.launch_epoch = a.epoch;
  b.epoch = a.epoch;
  b.nslots =
      a.staged_keys > 0 && a.staged_slots > 0 && static_cast<int>(blockIdx.x) < d.kv_heads ? a.staged_slots : a.slots;

  const int token0 = a.state[0];
  const int pos0 = a.state[1];
  // Cleared before any block can fail: failures only come from waits that outlast timeout_ns.
  if (blockIdx.x == 0 && threadIdx.x == 0) a.result[1] = 0;
  if (pos0 < 0 || static_cast<int64_t>(pos0) + a.steps > a.max_context || token0 < 0 || token0 >= d.vocab) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      fail(b.sync, b.result, b.host, b.launch_epoch,
           pos0 < 0 || static_cast<int64_t>(pos0) + a.steps > a.max_context ? MegakernelError::BadPosition
                                                                            : MegakernelError::BadToken);
    }
    return;  // every block reads the same state: all return
  }
  if (!path_serves<kPath>(a, pos0, a.steps)) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::WrongPath);
    return;  // (as above)
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.slots; i++) {
      mbar_init(&b.full[i], 1);
      mbar_init(&b.empty[i], kConsumers);
    }
    mbar_init(misc_barrier(b, kStagedBarrier), 1);
    mbar_init(misc_barrier(b, kStagedFreeBarrier), kConsumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    b.flag[0] = 0;
    b.flag[1] = 0;
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) produce<kQuant>(a, b, pos0);
    return;
  }

  const Layout& lay = a.layout;
  RingPos at;
  int token = token0;
  const bool quads = a.qkv_quads != 0;
  for (int step = 0; step < a.steps; step++) {
    const int pos = pos0 + step;
    b.epoch = a.epoch + static_cast<unsigned>(step);
    b.attn_skip = attention_skip(a, pos);
    if (step > 0) {
      // The previous step's token, for this step's embedding row. Every block waits for it, also those that do
      // not read the row: it is published after every block's arrival, so once it is seen (and fenced), everything
      // the previous step wrote (the new cache rows above all) is visible here.
      if (threadIdx.x == 0) {
        const int t = token_wait(b.sync, b.result, b.host, b.launch_epoch, b.epoch - 1, b.timeout_ns);
        __threadfence();
        b.flag[2] = t;
        if (t < 0 || t >= d.vocab) b.flag[0] = 1;
      }
      consumer_sync();
      if (b.flag[0] != 0) return;
      token = b.flag[2];
    }
    b.embed_row = static_cast<const bf16*>(a.embed) + static_cast<int64_t>(token) * d.hidden;
    Best best{-INFINITY, INT32_MAX};
    TopK top{0ull, 0ull, 0ull, 0};
    const int len = pos + 1;
    const int chunks = kPath == kPathStaged ? 1 : attention_chunks(a, pos);
    const int chunk_len = (len + chunks - 1) / chunks;

    // This block's attention work item, if any (at most one: items ≤ grid).
    const int item = blockIdx.x < d.kv_heads * chunks && (a.debug & 2) == 0 ? static_cast<int>(blockIdx.x) : -1;
    const int item_g = item < 0 ? 0 : item / chunks, item_c = item < 0 ? 0 : item % chunks;
    const int item_p0 = item_c * chunk_len;
    const int item_p1 = max(item_p0, min(len, item_p0 + chunk_len));
    for (int layer = 0; layer < d.layers; layer++) {
      const MegakernelLayer& L = a.layers[layer];
      const int ev = layer * kMegakernelTraceEventsPerLayer;
      stamp(a, ev);
      // tuning kvPrefetch: the cached rows this block's attention will read start towards L2 here (the
      // old default). Off by default: the attention issues its first pass's loads (and stages a short second pass)
      // before it waits for q/k/v, and the prefetch's traffic slowed the residual's hop more than it sped the later
      // passes (without it, 4-10 µs per token faster at positions 512-1024, 35 at 4096).
      if (item >= 0 && a.kv_prefetch != 0)
        prefetch_chunk(L, static_cast<int>(d.kv_heads), item_g, item_p0, min(item_p1, pos));
      // 1. QKV (a block without QKV or O rows, an attention block on a short context, needs neither the normalised
      // input nor the residual here: the gate/up stage reads the residual again)
      if (!skips_stage(kQkv, b.attn_skip)) {
        const void* res_in = layer == 0 ? nullptr : stage_output(a, lay, layer - 1, kDown);
        if (!stage_norm_input(a, b, res_in, static_cast<const bf16*>(L.input_norm), d.hidden, a.eps)) return;
      }
      stamp(a, ev + 1);
      if (!(quads ? consume_gemv<Take::kQuad, kSample, kQuant>(a, b, lay, kQkv, at, layer, best, top, ev + 2)
                  : consume_gemv<Take::kPair, kSample, kQuant>(a, b, lay, kQkv, at, layer, best, top, ev + 2)))
        return;
      stamp(a, ev + 3);
      // 2. Attention
      if (item >= 0) {
        // (The staged attention's barrier completes once per layer of each step that uses it.)
        const unsigned parity = static_cast<unsigned>(staged_steps_before(a, pos0, step) * d.layers + layer) & 1u;
        if (!attend<G, !kSample && G <= 3, kPath, kPad>(a, b, lay, layer, item_g, item_c, chunks, item_p0, item_p1, pos,
                                                  ev + 4, parity))
          return;
        // The staged attention over the whole ring: the last layer's is done with the staged rows, so the producer
        // may fill the ring again (every consumer thread arrives once its own accesses to them are done).
        if (layer == d.layers - 1 && skips_stage(kDown, b.attn_skip))
          mbar_arrive(misc_barrier(b, kStagedFreeBarrier));
      } else {
        stamp(a, ev + 4);
        stamp(a, ev + 5);
        stamp(a, ev + 6);
      }
      stamp(a, ev + 7);
      // 3.–5. O projection + residual; RMSNorm + gate/up + SwiGLU; down projection + residual. O and down run in one
      // loop that is not unrolled, so that their input copy and their GEMV are in the kernel's code once: 8 KB less
      // code for every layer to fetch again; 5-15 µs per token faster at positions 1 and 128, a few at 512 and 1024,
      // about 5 slower at 4096.
      // (A loop over all four stages, with the attention inside it, runs out of registers and spills: 50-110 µs per
      // token slower.)
      // Heads of 2…o_merge chunks (query groups of 2) are merged by the O blocks as they gather their input, here,
      // outside the loop below: inside it, the gather's batch of loads spilled.
      const bool o_merged =
          G == 2 && kPath != kPathStaged && chunks > 1 && chunks <= a.o_merge && !skips_stage(kO, b.attn_skip);
      if (o_merged && !stage_merge_input(a, b, static_cast<uint8_t*>(a.workspace) + lay.omerge +
                                                   lay.omerge_layer * layer,
                                         chunks, static_cast<int>(d.q_heads)))
        return;
#pragma unroll 1
      for (int h = 0; h < 2; h++) {
        const int stage = h == 0 ? kO : kDown, sev = ev + (h == 0 ? 8 : 14);
        // (A block without O rows, an attention block on a short context, does not need the attention output; nor
        // does one that merged it above.)
        if (!skips_stage(stage, b.attn_skip) && !(h == 0 && o_merged) &&
            !stage_copy_input(a, b, stage_output(a, lay, layer, h == 0 ? kAttention : kGateUp),
                              h == 0 ? d.q_heads * kD : d.ffn))
          return;
        stamp(a, sev);
        if (!consume_gemv<Take::kPair, kSample, kQuant>(a, b, lay, stage, at, layer, best, top, sev + 1)) return;
        stamp(a, sev + 2);
        if (h == 0) {
          // (A block without gate/up or down rows, the staged attention's over the whole ring, needs neither the
          // normalised input nor the residual that the down epilogue adds.)
          if (!(skips_stage(kGateUp, b.attn_skip) && skips_stage(kDown, b.attn_skip)) &&
              !stage_norm_input(a, b, stage_output(a, lay, layer, kO), static_cast<const bf16*>(L.post_norm),
                                d.hidden, a.eps))
            return;
          stamp(a, ev + 11);
          if (!consume_gemv<Take::kGateUp, kSample, kQuant>(a, b, lay, kGateUp, at, layer, best, top, ev + 12)) return;
          stamp(a, ev + 13);
        }
      }
    }

    // Final norm, LM head, argmax.
    const int ev_end = static_cast<int>(d.layers) * kMegakernelTraceEventsPerLayer;
    if (!stage_norm_input(a, b, stage_output(a, lay, static_cast<int>(d.layers) - 1, kDown),
                          static_cast<const bf16*>(a.final_norm), d.hidden, a.eps))
      return;
    stamp(a, ev_end);
    if constexpr (kScreen) {
      if (!consume_screen<kSample>(a, b, at, best, top)) return;
    } else {
      if (a.mask_tags != nullptr && !lm_mask_ready(a, b)) return;
      if (!consume_gemv<Take::kPair, kSample, kQuant>(a, b, lay, -1, at, -1, best, top, -1)) return;
    }
    stamp(a, ev_end + 1);
    bool ok;
    if constexpr (kSample) ok = step_sample(a, b, lay, top, step, pos);
    else ok = step_argmax(a, b, lay, best, step, pos);
    if (step + 1 < a.steps && !block_ok(b, ok)) return;
  }
#endif
}

using DecodeKernel = void (*)(MegakernelArgs);

/**
 * The kernel for a model's query group (1 to 4: the plan refuses others), the steps' draw, (argmax steps) whether
 * the LM head is screened, and the attention path (groups of 2 only: the others attend by chunks alone).
 */
template <int G, int kPath, bool kQuant = false>
DecodeKernel decode_kernel_of(bool sample, bool screen) {
  if (sample)
    return screen ? qwen3_decode_kernel<true, G, true, kPath, -1, kQuant>
                  : qwen3_decode_kernel<true, G, false, kPath, -1, kQuant>;
  return screen ? qwen3_decode_kernel<false, G, true, kPath, -1, kQuant>
                : qwen3_decode_kernel<false, G, false, kPath, -1, kQuant>;
}

/**
 * The kernel for `d`: by its query group and, for bf16 projections, the attention path. INT8 and INT4 projections
 * (query groups of 2 and 4 only, as the plan checks: every dense Qwen3 shape the megakernel serves) run kernels of
 * their own with both attention paths, so that the bf16 kernels carry none of their code.
 */
DecodeKernel decode_kernel(const MegakernelDims& d, bool sample, bool screen, int path) {
  if (d.weight_bits != 16)
    return d.q_heads == 2 * d.kv_heads ? decode_kernel_of<2, kPathBoth, true>(sample, screen)
                                       : decode_kernel_of<4, kPathBoth, true>(sample, screen);
  switch (d.q_heads / d.kv_heads) {
    case 1: return decode_kernel_of<1, kPathBoth>(sample, screen);
    case 2:
      return path == kPathStaged ? decode_kernel_of<2, kPathStaged>(sample, screen)
                                 : decode_kernel_of<2, kPathBoth>(sample, screen);
    case 3: return decode_kernel_of<3, kPathBoth>(sample, screen);
    default: return decode_kernel_of<4, kPathBoth>(sample, screen);
  }
}

#include "pad_search.cuh"

/** The path a launch's kernel is compiled with: the staged attention alone where every step takes it, else both. */
int launch_path(const MegakernelArgs& args) {
  return args.path_kernels != 0 && args.position >= 0 && args.dims.q_heads == 2 * args.dims.kv_heads &&
                 args.dims.weight_bits == 16 &&
                 path_serves<kPathStaged>(args, args.position, args.steps)
             ? kPathStaged
             : kPathBoth;
}

}  // namespace

#include "plan.cuh"

// ---------------------------------------------------------------------------------------------------------------
// The launch

int megakernel_launch_path(const MegakernelArgs& args) { return launch_path(args); }

cudaError_t launch_megakernel(const MegakernelArgs& args, const MegakernelPlan& plan, cudaStream_t stream) {
  const bool long_ring = args.slots == plan.slots && args.slot_bytes == static_cast<int64_t>(plan.slot_bytes);
  const bool short_ring = plan.short_until > 0 && args.slots == plan.short_slots &&
                          args.slot_bytes == static_cast<int64_t>(plan.short_slot_bytes);
  if ((!long_ring && !short_ring) || args.steps < 1 || args.steps > kMegakernelMaxSteps || args.inflight < 0 ||
      args.lm_inflight < 0 || args.o_merge < 0 || args.o_merge > plan.o_merge || args.top_k < 0 ||
      args.top_k > kMegakernelMaxTopK ||
      args.dims.kv_heads <= 0 || args.dims.q_heads % args.dims.kv_heads != 0 ||
      args.dims.q_heads / args.dims.kv_heads < 1 || args.dims.q_heads / args.dims.kv_heads > kMegakernelMaxGroup)
    return cudaErrorInvalidValue;
  if (args.lm_screen != nullptr && (args.claim != 0 || plan.screen_rows <= 0))
    return cudaErrorInvalidValue;
  // A mask comes in slots of whole vocabularies.
  if ((args.mask_tags == nullptr) != (args.mask_words == nullptr) ||
      (args.mask_tags != nullptr && args.mask_stride < (args.dims.vocab + 31) / 32))
    return cudaErrorInvalidValue;
  // The staged attention: query groups of 2, fixed shares, whole 16-key tiles, and rows that fit past the ring it keeps
  // or, over the whole ring, in its place (and then its blocks must skip the layers' rows: fewer items than the grid,
  // and no more than skip_items).
  const bool whole_ring = args.staged_slots == 0;
  if (args.staged_keys != 0 &&
      (args.staged_keys < 0 || args.staged_keys > kMegakernelStagedMaxKeys || args.staged_keys % 16 != 0 ||
       args.dims.q_heads != 2 * args.dims.kv_heads || args.claim != 0 || args.staged_from < 1 ||
       (whole_ring ? args.staged_keys > plan.staged_ring_keys || args.dims.kv_heads > args.skip_items ||
                         args.dims.kv_heads >= plan.grid
                   : args.staged_slots < 2 ||
                         args.staged_slots != megakernel_staged_slots(args.slots, args.slot_bytes, args.staged_keys))))
    return cudaErrorInvalidValue;
  if (args.top_k > 0) {
    if (!(args.temperature > 0.0) || !std::isfinite(args.temperature) || !(args.top_p > 0.0 && args.top_p <= 1.0) ||
        !(args.sample_scale > 0.0))
      return cudaErrorInvalidValue;
    for (int s = 0; s < args.steps; s++)
      if (!(args.uniforms[s] >= 0.0 && args.uniforms[s] < 1.0)) return cudaErrorInvalidValue;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(plan.grid);
  config.blockDim = dim3(plan.threads);
  config.dynamicSmemBytes = plan.smem_bytes;
  config.stream = stream;
  MegakernelArgs launch = args;
  launch.layout = workspace_layout(args.dims, plan.grid, plan.max_chunks);
  const int path = launch_path(args);
  DecodeKernel kernel = decode_kernel(args.dims, args.top_k > 0, args.lm_screen != nullptr, path);
#ifdef QK_MEGAKERNEL_PAD_SEARCH
  if (args.dims.q_heads == 2 * args.dims.kv_heads) {
    const DecodeKernel padded = pad_kernel(path, args.top_k > 0, args.lm_screen != nullptr);
    if (padded != nullptr) kernel = padded;
  }
#endif
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, launch);
  const cudaError_t last = cudaGetLastError();
  return launched != cudaSuccess ? launched : last;
}

#include "screen_build.cuh"

}  // namespace qk
