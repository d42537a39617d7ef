/**
 * End-to-end suites through a model's public generate loop, host overhead included: `decode` (tokens/s per
 * position per engine, beside HF transformers), `prefill` (prompt latency per length) and `patch` (eager-style vs
 * fused modules). `@qk/bench` does not depend on the model package: the caller (the CLI) opens models with
 * `@qk/qwen3` and hands them over as {@link E2eModel}s.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { machineInfo } from './machine.js';
import { peersDir } from './peers/torch.js';
import { measureCeiling } from './run-op-suite.js';
import {
  BENCH_SCHEMA,
  type BenchBackend,
  type BenchReport,
  type BenchRow,
  type BenchTable,
  type Ceiling,
  type MachineInfo,
  type PeerStatus,
} from './schema.js';
import { summarize } from './stats.js';

/** What one generation reports (a subset of @qk/qwen3's GenerationStats). */
export interface E2eStats {
  prefillMs: number;
  decodeTokensPerSecond: number;
}

/** A loaded model as the end-to-end suites use it. */
export interface E2eModel {
  /** The engine that runs decode (`cpu`, `layered`, `megakernel` …). */
  readonly engine: string;
  /** Checkpoint directory or preset name. */
  readonly source: string;
  /** Prompt ids are drawn below this. */
  readonly vocabSize: number;
  /** Bytes one decode step at `position` must read (weights once, KV cache up to the position). */
  bytesPerToken(position: number): number;
  /** A line for the report's notes about how this engine reads its bytes (e.g. a screened LM head). */
  readonly note?: string;
  /** How `generate` draws its tokens when it samples (e.g. "temperature 0.6, top-k 20, top-p 0.95, seed 0"); absent: greedy. */
  readonly sampling?: string;
  /** Generation of `maxTokens` tokens after the prompt `ids`: greedy, or by {@link sampling}. */
  generate(ids: number[], maxTokens: number): Promise<E2eStats>;
  /** Swaps module implementations (`{ rmsnorm: 'eager' }`); returns the undo. Absent when the engine cannot. */
  patch?(spec: Record<string, string>): () => void;
  dispose(): void;
}

/** Opens the model of a run on an engine (undefined: the model's default engine). */
export type E2eOpener = (engine: string | undefined) => Promise<E2eModel>;

export interface E2eCommon {
  backend: BenchBackend;
  open: E2eOpener;
  /** Runs per case; the median is reported (default 3). */
  runs?: number;
  /** A checkpoint directory HF transformers can load, for the HF peers (absent: peers skipped, with the reason). */
  hfCheckpoint?: string;
  /** Run the HF peers (default true). */
  peers?: boolean;
  onProgress?: (line: string) => void;
  machine?: MachineInfo;
  ceiling?: Ceiling;
  /** Report name (default the suite's), e.g. `decode-8b` for a second model in one report directory. */
  name?: string;
}

/** The HF transformers decode peers: `eager` (dynamic cache) and `graph` (static cache + one CUDA graph per step). */
export type HfDecodePeer = 'eager' | 'graph';
export const HF_DECODE_PEERS: readonly HfDecodePeer[] = ['eager', 'graph'];

export interface DecodeSuiteOptions extends E2eCommon {
  /** Engines measured one after the other on the same model (undefined: the default engine only). */
  engines?: (string | undefined)[];
  positions: number[];
  /** Generated tokens per run (default 256). */
  tokens?: number;
  /**
   * The HF peers to run (default both). Eager decode is slow (tens of ms per token), so `['graph']` measures the
   * static-cache peer in a fraction of the time.
   */
  hfPeers?: readonly HfDecodePeer[];
}

export interface PrefillSuiteOptions extends E2eCommon {
  engines?: (string | undefined)[];
  lengths: number[];
}

export interface PatchSuiteOptions extends E2eCommon {
  lengths: number[];
  /** Decode tokens after a 128-token prompt (default 128). */
  tokens?: number;
}

export const HF_PEERS: readonly Omit<PeerStatus, 'available'>[] = [
  { name: 'hf-eager', label: 'HF eager' },
  { name: 'hf-static-graph', label: 'HF static cache + CUDA graph' },
];
/**
 * The prefill peers: one HF forward over the prompt with each of HF's attention implementations (torch SDPA, its
 * default, and its own eager matmul + softmax), measured in the same invocation.
 */
export const HF_PREFILL_PEERS: readonly Omit<PeerStatus, 'available'>[] = [
  { name: 'hf-sdpa', label: 'HF (sdpa attention)' },
  { name: 'hf-eager', label: 'HF (eager attention)' },
];
/** The report name of each HF decode peer (HF_PEERS, in the same order). */
const HF_PEER_NAME: Record<HfDecodePeer, string> = { eager: 'hf-eager', graph: 'hf-static-graph' };

/** Seeded prompt ids (a fixed LCG: the same prompt on every run and machine). */
export function promptIds(length: number, limit: number): number[] {
  let s = 12345 + length;
  return Array.from({ length }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s % limit;
  });
}

interface HfRun {
  available: boolean;
  reason?: string;
  version?: string;
  results: { peer: string; position?: number; length?: number; tokPerS?: number; ms?: number }[];
}

/** Runs peers/hf_decode.py (decode positions or prefill lengths) on a checkpoint; never throws. */
export function runHfPeers(
  checkpoint: string | undefined,
  mode: { positions: number[]; tokens: number; peers?: readonly HfDecodePeer[] } | { prefill: number[] },
  runs: number,
  enabled = true,
): HfRun {
  if (!enabled) return { available: false, reason: 'disabled (--no-peers)', results: [] };
  if (checkpoint === undefined) {
    return {
      available: false,
      reason: 'needs --model DIR (a checkpoint HF transformers can load; `qk model init` writes one)',
      results: [],
    };
  }
  const script = join(peersDir(), 'hf_decode.py');
  if (!existsSync(script)) return { available: false, reason: `${script} not found`, results: [] };
  const python = process.env.QK_PYTHON ?? 'python3';
  const args =
    'prefill' in mode
      ? ['--prefill', mode.prefill.join(','), '--peers', 'sdpa,eager']
      : [
          '--positions',
          mode.positions.join(','),
          '--tokens',
          String(mode.tokens),
          '--peers',
          (mode.peers ?? HF_DECODE_PEERS).join(','),
        ];
  const r = spawnSync(python, [script, checkpoint, ...args, '--runs', String(runs)], {
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
    timeout: 1_800_000,
  });
  if (r.error) return { available: false, reason: `${python}: ${r.error.message}`, results: [] };
  if (r.status !== 0) {
    const last = (r.stderr || '').trim().split('\n').pop() ?? '';
    return { available: false, reason: `hf_decode.py failed: ${last}`, results: [] };
  }
  try {
    const doc = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as {
      torch: string;
      transformers: string;
      results: HfRun['results'];
    };
    if (!Array.isArray(doc?.results)) throw new Error('no results');
    return {
      available: true,
      version: `torch ${doc.torch}, transformers ${doc.transformers}`,
      results: doc.results,
    };
  } catch {
    return { available: false, reason: 'hf_decode.py printed no JSON result', results: [] };
  }
}

/** Each declared peer's status; `requested` (report names) leaves the others unavailable, saying so. */
function peerStatus(
  declared: readonly Omit<PeerStatus, 'available'>[],
  run: HfRun,
  requested?: readonly string[],
): PeerStatus[] {
  return declared.map((p) => {
    if (requested !== undefined && !requested.includes(p.name))
      return { ...p, available: false, reason: 'not requested (--hf-peers)' };
    return {
      ...p,
      available: run.available,
      ...(run.available ? {} : { reason: run.reason ?? 'unavailable' }),
      ...(run.version ? { version: run.version } : {}),
    };
  });
}

/** Opens each engine in turn, runs `work`, always disposes; an engine that cannot open is noted, not fatal. */
async function forEachEngine<T>(
  options: E2eCommon & { engines?: (string | undefined)[] },
  notes: string[],
  work: (model: E2eModel) => Promise<T>,
): Promise<T[]> {
  const out: T[] = [];
  for (const engine of options.engines ?? [undefined]) {
    let model: E2eModel;
    try {
      model = await options.open(engine);
    } catch (e) {
      if (options.engines === undefined || options.engines.length === 1) throw e;
      notes.push(`engine ${engine} not measured: ${(e as Error).message}`);
      continue;
    }
    if (model.note !== undefined) notes.push(model.note);
    try {
      out.push(await work(model));
    } finally {
      model.dispose();
    }
  }
  return out;
}

/**
 * Decode speed of `runs` generations of `tokens` tokens after the prompt `ids`, following one untimed warm-up of
 * `warmupTokens` (graph capture, allocator): the per-run rates, µs per token summarised, and the median rate.
 */
async function decodeRuns(
  model: E2eModel,
  ids: number[],
  warmupTokens: number,
  tokens: number,
  runs: number,
) {
  await model.generate(ids, warmupTokens);
  const rates: number[] = [];
  for (let r = 0; r < runs; r++) rates.push((await model.generate(ids, tokens)).decodeTokensPerSecond);
  return { rates, ...rateRow(rates) };
}

/** Prefill ms of `runs` one-token generations after the prompt `ids`, following one untimed warm-up, summarised. */
async function prefillRuns(model: E2eModel, ids: number[], runs: number) {
  await model.generate(ids, 1);
  const ms: number[] = [];
  for (let r = 0; r < runs; r++) ms.push((await model.generate(ids, 1)).prefillMs);
  return summarize(ms.map((m) => Math.max(m, 1e-3)));
}

/** µs per token of each run, summarised; tokPerS the median rate. */
function rateRow(rates: number[]) {
  const timing = summarize(rates.map((r) => 1e6 / r));
  return { timing, tokPerS: 1e6 / timing.median };
}

/** The fields every end-to-end report starts with. */
export const reportHeader = (
  o: Pick<E2eCommon, 'name' | 'backend' | 'machine'>,
  suite: string,
  title: string,
  description: string,
  unit: 'us' | 'ms',
): Omit<BenchReport, 'peers' | 'rows' | 'charts' | 'machine'> & { machine: MachineInfo } => ({
  schema: BENCH_SCHEMA,
  suite: o.name ?? suite,
  title,
  description,
  backend: o.backend,
  status: 'ok',
  unit,
  machine: o.machine ?? machineInfo(),
});

/** Decode tokens/s per position for each engine, with HF peers and the copy ceiling measured in the same run. */
export async function runDecodeSuite(o: DecodeSuiteOptions): Promise<BenchReport> {
  const started = performance.now();
  const runs = o.runs ?? 3;
  const tokens = o.tokens ?? 256;
  const log = o.onProgress ?? (() => {});
  const hfPeers = HF_DECODE_PEERS.filter((p) => (o.hfPeers ?? HF_DECODE_PEERS).includes(p));
  if (hfPeers.length === 0) throw new RangeError('hfPeers must name at least one of: eager, graph');
  const requested = hfPeers.map((p) => HF_PEER_NAME[p]);
  const ceiling = o.ceiling ?? measureCeiling(o.backend);
  const notes: string[] = [];
  let source = '';
  let sampling: string | undefined;
  const rows: BenchRow[] = [];
  await forEachEngine(o, notes, async (model) => {
    source = model.source;
    sampling ??= model.sampling;
    for (const position of o.positions) {
      const ids = promptIds(position, model.vocabSize);
      const { rates, timing, tokPerS } = await decodeRuns(model, ids, Math.min(8, tokens), tokens, runs);
      // The KV cache grows over the run: count it at the run's middle position.
      const bytes = model.bytesPerToken(position + tokens / 2);
      const gbPerS = (bytes * tokPerS) / 1e9;
      rows.push({
        id: `${model.engine}-p${position}`,
        series: model.engine,
        label: `${model.engine} position ${position}`,
        x: position,
        params: { engine: model.engine, position, tokens, runs },
        timing,
        tokPerS,
        bytes,
        gbPerS,
        pctOfCeiling: (100 * gbPerS) / ceiling.gbPerS,
        peers: {},
        extra: { runsTokPerS: rates },
      });
      log(`decode ${model.engine} position ${position}: ${tokPerS.toFixed(1)} tok/s`);
    }
  });
  const hfTokens = Math.min(tokens, 128);
  const hf = runHfPeers(
    o.hfCheckpoint,
    { positions: o.positions, tokens: hfTokens, peers: hfPeers },
    runs,
    o.peers !== false,
  );
  for (const row of rows) {
    for (const p of HF_PEERS.filter((x) => requested.includes(x.name))) {
      const found = hf.results.find((x) => x.peer === p.name && x.position === row.params.position);
      if (found?.tokPerS) {
        const time = 1e6 / found.tokPerS;
        row.peers[p.name] = { time, ratio: time / row.timing.median };
      }
    }
  }
  if (hf.available)
    notes.push(`HF peers generate ${hfTokens} tokens per run (qk: ${tokens}), median of ${runs}.`);
  if (sampling !== undefined && hf.available)
    notes.push(
      'qk samples; the HF peers decode greedily, so their ratios set a sampled step beside a greedy one.',
    );
  const base = reportHeader(
    o,
    'decode',
    `Decode speed per position (${source})`,
    `Batch-1 ${sampling === undefined ? 'greedy decode' : `decode sampling with ${sampling}`} from JS end to end (model.generate: host loop, streaming detokenisation and the copy-back of each token included): for each position P, a prompt of P seeded ids, then ${tokens} tokens, median of ${runs} runs. GB/s counts the bytes a token must read (every weight once, the KV cache up to the run's middle position) against the device copy ceiling; HF transformers runs on the same checkpoint in the same invocation, ${hfPeers.map((p) => (p === 'eager' ? 'eager' : 'with a static cache + one CUDA graph per step')).join(' and ')}.`,
    'us',
  );
  return {
    ...base,
    ceiling,
    peers: peerStatus(HF_PEERS, hf, requested),
    rows,
    charts:
      rows.length === 0
        ? []
        : [
            {
              id: 'tokps',
              title: `Decode tokens/s vs position (${source})`,
              y: 'tokPerS',
              xLabel: 'position (prompt length)',
              yLabel: 'tokens / s',
              logX: true,
              peers: hf.available ? requested : [],
            },
          ],
    notes,
    seconds: (performance.now() - started) / 1000,
  };
}

/** Prompt latency (forward pass over the prompt + first token) per length for each engine, beside HF eager. */
export async function runPrefillSuite(o: PrefillSuiteOptions): Promise<BenchReport> {
  const started = performance.now();
  const runs = o.runs ?? 3;
  const log = o.onProgress ?? (() => {});
  const notes: string[] = [];
  let source = '';
  const rows: BenchRow[] = [];
  await forEachEngine(o, notes, async (model) => {
    source = model.source;
    for (const length of o.lengths) {
      const ids = promptIds(length, model.vocabSize);
      const timing = await prefillRuns(model, ids, runs);
      rows.push({
        id: `${model.engine}-l${length}`,
        series: model.engine,
        label: `${model.engine} ${length} tokens`,
        x: length,
        params: { engine: model.engine, length, runs },
        timing,
        peers: {},
        extra: { promptTokPerS: (1000 * length) / timing.median },
      });
      log(`prefill ${model.engine} ${length} tokens: ${timing.median.toFixed(2)} ms`);
    }
  });
  const hf = runHfPeers(o.hfCheckpoint, { prefill: o.lengths }, runs, o.peers !== false);
  for (const row of rows) {
    for (const peer of HF_PREFILL_PEERS) {
      const found = hf.results.find((x) => x.peer === peer.name && x.length === row.params.length);
      if (found?.ms) row.peers[peer.name] = { time: found.ms, ratio: found.ms / row.timing.median };
    }
  }
  return {
    ...reportHeader(
      o,
      'prefill',
      `Prefill latency per prompt length (${source})`,
      `Time from the prompt to its first token (the prompt's forward pass: GEMMs and flash-style prefill attention, then the LM head on the last row and the first token's copy-back), from JS, median of ${runs} runs after one warm-up. HF transformers (one forward over the prompt with its sdpa and with its eager attention, last-position logits, argmax read back) runs on the same checkpoint in the same invocation.`,
      'ms',
    ),
    peers: peerStatus(HF_PREFILL_PEERS, hf),
    rows,
    charts:
      rows.length === 0
        ? []
        : [
            {
              id: 'latency',
              title: `Prefill latency vs prompt length (${source})`,
              y: 'time',
              xLabel: 'prompt tokens',
              yLabel: 'ms',
              logX: true,
              peers: hf.available ? HF_PREFILL_PEERS.map((p) => p.name) : [],
            },
          ],
    notes,
    seconds: (performance.now() - started) / 1000,
  };
}

/** The variants of `qk bench patch`: everything fused (the default), each module eager-style alone, all eager. */
export const PATCH_VARIANTS: readonly { name: string; spec: Record<string, string> }[] = [
  { name: 'fused (default)', spec: {} },
  { name: 'RMSNorm eager', spec: { rmsnorm: 'eager' } },
  { name: 'SwiGLU MLP eager', spec: { mlp: 'eager' } },
  { name: 'RoPE eager', spec: { rope: 'eager' } },
  { name: 'all eager', spec: { rmsnorm: 'eager', mlp: 'eager', rope: 'eager' } },
];

/** Prefill latency and decode speed with eager-style vs fused modules (the seed's end-to-end table). */
export async function runPatchSuite(o: PatchSuiteOptions): Promise<BenchReport> {
  const started = performance.now();
  const runs = o.runs ?? 3;
  const tokens = o.tokens ?? 128;
  const log = o.onProgress ?? (() => {});
  const rows: BenchRow[] = [];
  const model = await o.open(undefined);
  const source = model.source;
  const engine = model.engine;
  try {
    if (!model.patch) {
      return {
        ...reportHeader(o, 'patch', 'Eager-style vs fused modules', 'Module patching end to end.', 'ms'),
        status: 'skipped',
        skipReason: `the ${engine} engine has no patchable modules (patching needs the layered GPU engine)`,
        peers: [],
        rows: [],
        charts: [],
      };
    }
    for (const variant of PATCH_VARIANTS) {
      const undo = model.patch(variant.spec);
      try {
        for (const length of o.lengths) {
          const ids = promptIds(length, model.vocabSize);
          rows.push({
            id: `${variant.name}/prefill-${length}`,
            series: variant.name,
            label: `${variant.name}: prefill ${length}`,
            x: length,
            params: { variant: variant.name, measure: 'prefill', length, runs, ...variant.spec },
            timing: await prefillRuns(model, ids, runs),
            peers: {},
          });
        }
        const ids = promptIds(128, model.vocabSize);
        const { rates, timing, tokPerS } = await decodeRuns(model, ids, 8, tokens, runs);
        rows.push({
          id: `${variant.name}/decode`,
          series: `${variant.name} (decode)`,
          label: `${variant.name}: decode after 128`,
          x: 128,
          params: { variant: variant.name, measure: 'decode', tokens, runs, ...variant.spec },
          // ms per token, the report's unit.
          timing: {
            ...timing,
            median: timing.median / 1000,
            p10: timing.p10 / 1000,
            p90: timing.p90 / 1000,
            min: timing.min / 1000,
          },
          tokPerS,
          peers: {},
          extra: { runsTokPerS: rates },
        });
        log(`patch ${variant.name}: decode ${tokPerS.toFixed(1)} tok/s`);
      } finally {
        undo();
      }
    }
  } finally {
    model.dispose();
  }
  const table = patchTable(rows, o.lengths);
  return {
    ...reportHeader(
      o,
      'patch',
      `Eager-style vs fused modules (${source}, ${engine})`,
      `The same model with each module kind patched to its eager-style implementation (separate square/mean/rsqrt/mul launches for RMSNorm, SiLU then mul for the MLP, unfused RoPE): prefill latency per prompt length and decode tokens/s after a 128-token prompt (${tokens} tokens), median of ${runs} runs. Speedup = the variant's time / the fused default's.`,
      'ms',
    ),
    peers: [],
    rows,
    charts: [
      {
        id: 'prefill',
        title: `Prefill latency by variant (${source})`,
        y: 'time',
        xLabel: 'prompt tokens',
        yLabel: 'ms',
        logX: true,
        series: PATCH_VARIANTS.map((v) => v.name),
      },
    ],
    tables: [table],
    seconds: (performance.now() - started) / 1000,
  };
}

function patchTable(rows: readonly BenchRow[], lengths: readonly number[]): BenchTable {
  const find = (variant: string, id: string) => rows.find((r) => r.id === `${variant}/${id}`);
  const last = lengths[lengths.length - 1]!;
  const base = {
    prefill: find(PATCH_VARIANTS[0]!.name, `prefill-${last}`),
    decode: find(PATCH_VARIANTS[0]!.name, 'decode'),
  };
  return {
    title:
      'One row per variant (the seed’s table): prefill ms per prompt length, decode tok/s, and how much faster the fused default is',
    header: [
      'variant',
      ...lengths.map((l) => `prefill ${l} ms`),
      'decode tok/s',
      `fused speedup (prefill ${last})`,
      'fused speedup (decode)',
    ],
    numeric: [false, ...lengths.map(() => true), true, true, true],
    rows: PATCH_VARIANTS.map((v) => {
      const prefill = lengths.map((l) => find(v.name, `prefill-${l}`)?.timing.median.toFixed(2) ?? '—');
      const decode = find(v.name, 'decode');
      const p = find(v.name, `prefill-${last}`);
      return [
        v.name,
        ...prefill,
        decode?.tokPerS?.toFixed(1) ?? '—',
        p && base.prefill ? `${(p.timing.median / base.prefill.timing.median).toFixed(2)}×` : '—',
        decode?.tokPerS && base.decode?.tokPerS
          ? `${(base.decode.tokPerS / decode.tokPerS).toFixed(2)}×`
          : '—',
      ];
    }),
  };
}
