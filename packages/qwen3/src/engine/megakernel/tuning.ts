/**
 * The Qwen3 decode megakernel's tuning knobs: one typed object, checked where it enters (the CLI, the engine, the
 * `Qwen3Megakernel` wrapper) and handed to the addon, which reads it when a plan or an instance is made. Every field is
 * optional and an absent one keeps today's default, so `{}` is the production kernel; the knobs exist to measure
 * variants (packages/cuda-core/csrc/megakernel/DESIGN.md, "Tuning"). The µs figures below are per token, from JS, on
 * an H100 unless said.
 */
import type { MegakernelTuningArgs, MegakernelTuningField } from '@qk/cuda-core';
import { QkValueError } from '@qk/ops';

/** The megakernel's tuning knobs (see the module header): every field optional, absent = the default. */
export interface MegakernelTuning {
  /**
   * KB (1,024 bytes) per slot of the weight ring each block streams weights through, in shared memory. Default
   * (absent or 0): the plan's, 20 KB slots (the best of a 12–32 KB sweep), plus a ring of 28 KB slots for launches
   * that start below position 512 (fewer, larger copies where attention is short: up to 14 µs at position 1); both
   * are widened to the model's widest tile of two rows. A size given here puts every launch on one ring of that size
   * (widened the same way). Integer, 0–227 (the most shared memory a Hopper block can opt into).
   */
  readonly slotKb?: number;
  /**
   * Weight copies in flight per block, at most. Default 1: a second copy measured 25–70 µs slower (more bytes in
   * flight slow every dependent hop). 0 lets as many fly as the ring has free slots. Integer, 0–1024.
   */
  readonly inflight?: number;
  /**
   * The LM head's weight copies in flight per block, at most (no hop waits behind its stream). Default: 2 on models
   * whose blocks take fixed shares (Qwen3-0.6B, 1.7B: 8–10 µs gained at 0.6B positions 512–1024, 17–26 at 1.7B), 1
   * on those that claim tiles (4B, 8B: two copies of their wide slots lost 20 µs at 8B), or {@link inflight} where
   * that is larger; 0 (unbounded) when `inflight` is 0. Integer, 0–1024.
   */
  readonly lmInflight?: number;
  /**
   * Blocks claim GEMV tiles from shared counters (true) or take fixed shares of rows (false). Default: the plan's,
   * claimed from 1 MB of weights per block and layer (4B, 8B: 167.7 → 174.7 tok/s at 8B), fixed below (0.6B: a
   * claim's round trip cost more than the balance, 1,168 → 824 tok/s). Claimed tiles switch off the LM-head screen
   * and the staged attention. The tokens are the same bits either way.
   */
  readonly claimTiles?: boolean;
  /**
   * Attention work items up to which the blocks that attend take no QKV or O rows. Default: the plan's, half the
   * grid with fixed shares (a quarter measured 20–35 µs slower at positions 224–447), a quarter with claimed tiles
   * (where the others' bandwidth is the limit). 0: attending blocks always take rows. Integer, 0–4096.
   */
  readonly skipItems?: number;
  /**
   * Weight copies marked L2 evict-first, so that the KV cache stays in L2 while it fits. Default true (15–20 µs at
   * 0.6B position 1); false copies with the normal policy.
   */
  readonly l2Stream?: boolean;
  /**
   * A chunk's short second attention pass reads rows staged in shared memory (true) or the cache (false). Default
   * true (0–4 µs, the same bits).
   */
  readonly kvStage?: boolean;
  /**
   * Keys per attention chunk to aim for. Default 0: one pass per chunk (a chunk per block and KV head up to the
   * grid); 84 (one pass and a staged second) measured 10–15 µs slower at positions 128–767. Integer keys, 0–2^20.
   */
  readonly chunkKeys?: number;
  /**
   * Warps take QKV rows two pairs at a time, sharing one read of the input, where the plan allows it (every ring's
   * tiles hold at least four pairs: Qwen3-0.6B; elsewhere it has no effect). Default true (5–13 µs); false deals them
   * by pairs. The same bits either way.
   */
  readonly qkvQuads?: boolean;
  /**
   * The cached rows a block's attention will read are prefetched to L2 at each layer's start. Default false: the old
   * default, 4–10 µs slower at positions 512–1024 (24–25 µs on an H200).
   */
  readonly kvPrefetch?: boolean;
  /**
   * Heads split into 2…N attention chunks are merged by the O blocks as they gather their input, instead of by chunk
   * 0's block. Default 0 (off): 30–70 µs slower at 2–3 chunks, the larger gather costing more than the hop it saves.
   * Capped by the plan (3 in query groups of 2, else 0). Integer, 0–3.
   */
  readonly oMerge?: number;
  /**
   * Launches whose steps all take the staged attention run a kernel compiled without the attention by chunks.
   * Default true (5–8 µs at positions 128–383); false runs the kernel with both paths for every launch. The same
   * bits either way.
   */
  readonly pathKernels?: boolean;
  /**
   * Keys (position + 1) from which a step takes the staged attention (one block per KV head over rows staged in
   * shared memory, on the tensor cores; query groups of 2 with fixed shares). Default 57: past what one pass of a
   * chunk covers, where the attention by chunks would split heads. Integer keys, 0–2^31−1.
   */
  readonly stagedFrom?: number;
  /**
   * Keys up to which a step takes the staged attention (rounded up to 16). Default 384, the most the kernel stages
   * (8 µs at position 128, 3 at 1); 0 switches the staged attention off (attention by chunks at every position).
   * Integer keys, 0–384.
   */
  readonly stagedUntil?: number;
  /**
   * The staged attention's blocks take gate/up rows as the other blocks do. Default false (they take none, so they
   * finish the attention sooner).
   */
  readonly stagedGateUp?: boolean;
  /**
   * The staged attention's roundings: 1 (default) HF's (bf16 scores and normalised weights, so HF agreement holds);
   * 0 fp32 scores and unnormalised bf16 weights (10–13 µs faster at positions 1 and 128, later about 5, other bits,
   * HF agreement 98.8%); 2 HF's with `__fdiv_rn` (the same bits as 1, slower: a check). Integer, 0–2.
   */
  readonly stagedHf?: number;
  /**
   * The staged rows always take the place of the whole weight ring. Default false: they sit past the two or more ring
   * slots their blocks keep where the rows leave that many, else in the whole ring's place. The same bits either way.
   */
  readonly stagedRing?: boolean;
  /**
   * Diagnostic bits that switch parts of each step off to time the rest (DESIGN.md, "The overhead budget"): 1 no
   * waits for flagged words, 2 no attention, 4 no GEMV dot products, 8 no input gathers, 32 no weight copies (with
   * 4), 64 moves the trace's RoPE stamp after the attention passes. Every bit but 64 makes the tokens wrong (the
   * addon says so on stderr). Default 0. An integer of those bits (at most 111).
   */
  readonly debug?: number;
  /**
   * Milliseconds any wait inside the kernel may take before the step fails with a timeout error (a block that never
   * arrives: another program holds SMs, or a bug). Default 2000; raise it under compute-sanitizer, which slows the
   * kernel by orders of magnitude. Integer ms, 1–86,400,000.
   */
  readonly timeoutMs?: number;
}

/** True when `A` and `B` have the same keys, each of a type the other's accepts. */
type Agree<A, B> = [keyof A, keyof B] extends [keyof B, keyof A]
  ? [A, B] extends [B, A]
    ? true
    : false
  : false;
/** Fails to compile when {@link MegakernelTuning} and the binding's `MegakernelTuningArgs` part ways. */
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, used by nothing
type TuningIsTheBindings<T extends true = Agree<MegakernelTuning, MegakernelTuningArgs>> = T;

/**
 * Each field's kind and range as this `@qk/qwen3` was written for them: the checks below, and what the megakernel
 * compares with the addon's `megakernelTuningFields` when it first reaches the addon (addon.ts).
 */
export const MEGAKERNEL_TUNING_FIELDS = {
  slotKb: { kind: 'integer', min: 0, max: 227 },
  inflight: { kind: 'integer', min: 0, max: 1024 },
  lmInflight: { kind: 'integer', min: 0, max: 1024 },
  claimTiles: { kind: 'boolean' },
  skipItems: { kind: 'integer', min: 0, max: 4096 },
  l2Stream: { kind: 'boolean' },
  kvStage: { kind: 'boolean' },
  chunkKeys: { kind: 'integer', min: 0, max: 2 ** 20 },
  qkvQuads: { kind: 'boolean' },
  kvPrefetch: { kind: 'boolean' },
  oMerge: { kind: 'integer', min: 0, max: 3 },
  pathKernels: { kind: 'boolean' },
  stagedFrom: { kind: 'integer', min: 0, max: 2 ** 31 - 1 },
  stagedUntil: { kind: 'integer', min: 0, max: 384 },
  stagedGateUp: { kind: 'boolean' },
  stagedHf: { kind: 'integer', min: 0, max: 2 },
  stagedRing: { kind: 'boolean' },
  debug: { kind: 'bits', mask: 1 | 2 | 4 | 8 | 32 | 64 },
  timeoutMs: { kind: 'integer', min: 1, max: 86_400_000 },
} as const satisfies Record<keyof MegakernelTuning, MegakernelTuningField>;

/** What a field of kind `spec` must be, as a sentence's end. */
function expected(spec: MegakernelTuningField): string {
  switch (spec.kind) {
    case 'boolean':
      return 'a boolean';
    case 'integer':
      return `an integer in [${spec.min}, ${spec.max}]`;
    case 'bits':
      return `a non-negative integer made of the bits in ${spec.mask}`;
  }
}

function valid(spec: MegakernelTuningField, v: unknown): boolean {
  switch (spec.kind) {
    case 'boolean':
      return typeof v === 'boolean';
    case 'integer':
      return Number.isSafeInteger(v) && (v as number) >= spec.min && (v as number) <= spec.max;
    case 'bits':
      return Number.isSafeInteger(v) && (v as number) >= 0 && ((v as number) & ~spec.mask) === 0;
  }
}

function shown(v: unknown): string {
  return typeof v === 'string'
    ? JSON.stringify(v)
    : typeof v === 'object' && v !== null
      ? 'an object'
      : String(v);
}

/**
 * `value` checked as a {@link MegakernelTuning} and copied (frozen, absent and `undefined` fields left out): a plain
 * object whose every field is known, of its kind and in its range. `undefined` is `{}`.
 *
 * @param op the operation named in the error.
 * @param arg how the caller names the object (`megakernelTuning`, `spec.tuning`); errors name `arg.field`.
 * @throws QkValueError naming the field: an unknown name (with the known ones), a wrong type, a value out of range.
 */
export function checkMegakernelTuning(
  op: string,
  value: unknown,
  arg = 'megakernelTuning',
): MegakernelTuning {
  if (value === undefined) return Object.freeze({});
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new QkValueError(op, arg, `must be an object of megakernel tuning fields, got ${shown(value)}.`);
  }
  const known = Object.keys(MEGAKERNEL_TUNING_FIELDS);
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(value)) {
    if (!Object.hasOwn(MEGAKERNEL_TUNING_FIELDS, name)) {
      throw new QkValueError(
        op,
        `${arg}.${name}`,
        `is not a megakernel tuning field; the fields are ${known.join(', ')}.`,
      );
    }
    if (v === undefined) continue;
    const spec: MegakernelTuningField = MEGAKERNEL_TUNING_FIELDS[name as keyof MegakernelTuning];
    if (!valid(spec, v))
      throw new QkValueError(op, `${arg}.${name}`, `must be ${expected(spec)}, got ${shown(v)}.`);
    out[name] = v;
  }
  return Object.freeze(out) as MegakernelTuning;
}
