/**
 * `qk bench serve`: an OpenAI-compatible server under C concurrent streaming clients for D seconds (soak.ts), its
 * per-request decode speed beside a lone generation of the same requests on the same model in the same run, its
 * memory over the soak, and prefix reuse on a long chat (prefix.ts), as one `qk.bench/2` report. `@qk/bench` knows
 * neither the model nor the server: the caller starts the server and hands over a {@link ServeTarget}.
 */
import { QkValueError } from '@qk/ops';
import { machineInfo } from '../machine.js';
import {
  BENCH_SCHEMA,
  type BenchBackend,
  type BenchReport,
  type BenchRow,
  type BenchTable,
  type MachineInfo,
} from '../schema.js';
import { type Summary, summarize } from '../stats.js';
import { type ChatStats, type PrefixResult, runPrefixReuse } from './prefix.js';
import { soakRequests } from './prompts.js';
import {
  type MemorySample,
  type RequestRecord,
  runSoak,
  type SoakMessage,
  type SoakOptions,
  type SoakResult,
} from './soak.js';
import { STREAM_ERROR_KINDS } from './stream-check.js';

/** The running server and the model behind it, as the suite drives them. */
export interface ServeTarget {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** The model id requests name. */
  readonly model: string;
  readonly apiKey?: string;
  readonly engine: string;
  /** Checkpoint directory or preset. */
  readonly source: string;
  /** Tokens of `messages` rendered with the chat template, thinking off, as the server counts them. */
  promptTokens(messages: readonly SoakMessage[]): number;
  /** One greedy generation of `messages` straight on the model, thinking off (what `qk generate` runs): its stats. */
  chat(messages: readonly SoakMessage[], maxTokens: number): Promise<ChatStats>;
  /** The model forgets the prefix its cache holds (for a cold prefill). */
  forgetPrefix(): void;
  /**
   * The stats of the generations the server ran since the last call, as the engine timed them (no HTTP): the soak
   * then shows how much of a gap to the lone speed is the engine's and how much the server's and clients'.
   */
  takeServedStats?(): ChatStats[];
  memory(): MemorySample;
}

export interface ServeSuiteOptions {
  readonly backend: BenchBackend;
  readonly target: ServeTarget;
  readonly clients: number;
  readonly durationMs: number;
  /** `max_tokens` of every soak request (and of the lone generations). */
  readonly maxTokens: number;
  /** Base prompt lengths in words (≈ tokens), cycled through by every client. */
  readonly promptLengths: readonly number[];
  /** Words of history in the prefix-reuse chat (0: no prefix test). */
  readonly historyTokens: number;
  /** Lone generations per prompt length, and prefix-reuse runs. */
  readonly runs: number;
  /** GPU memory growth after warm-up above this fails the flatness bar (bytes). */
  readonly leakBytes: number;
  readonly signal?: AbortSignal;
  readonly onProgress?: (line: string) => void;
  readonly machine?: MachineInfo;
  /** Report name (default `serve`). */
  readonly name?: string;
  /** How the soak's clients send (runSoak's `send`; default: Node's fetch in this process). */
  readonly send?: SoakOptions['send'];
  /** Where those clients run, for the report's description (default `this process`). */
  readonly clientsRunIn?: string;
}

/** Above this share of a lone generation's decode speed, serving costs a request nothing that matters (issue 49). */
export const SERVED_SPEED_BAR = 0.9;
/** Turn 3's time to first token with its prefix reused, over a cold prefill of the same prompt (issue 49). */
export const PREFIX_TTFT_BAR = 0.1;

const MiB = 2 ** 20;
const fmt = (v: number, digits = 1) => v.toFixed(digits);
const spread = (s: Summary, digits = 1) =>
  `${fmt(s.p10, digits)} / ${fmt(s.median, digits)} / ${fmt(s.p90, digits)}`;

/** Runs the lone reference, the soak and the prefix test; the report says what each measured. */
export async function runServeSuite(o: ServeSuiteOptions): Promise<BenchReport> {
  const started = performance.now();
  const log = o.onProgress ?? (() => {});
  const { target } = o;
  const requestOf = soakRequests(o.promptLengths, (m) => target.promptTokens(m));
  const variants = o.promptLengths.map((_, v) => requestOf(0, v));

  // The lone reference: client 0's requests, each once untimed (graph capture, allocator), then `runs` times.
  const lone = async (messages: readonly SoakMessage[]) => {
    target.forgetPrefix();
    return (await target.chat(messages, o.maxTokens)).decodeTokensPerSecond;
  };
  for (const r of variants) await lone(r.messages);
  const loneRates: number[] = [];
  const loneByVariant: number[][] = variants.map(() => []);
  for (let run = 0; run < o.runs; run++) {
    for (const [v, r] of variants.entries()) {
      const rate = await lone(r.messages);
      loneRates.push(rate);
      loneByVariant[v]!.push(rate);
    }
  }
  const decoded = loneRates.filter((x) => x > 0);
  if (decoded.length === 0)
    throw new QkValueError(
      'runServeSuite',
      'maxTokens',
      `(${o.maxTokens}) left every lone generation with fewer than 2 tokens, so none has a decode speed: raise it (--tokens), or use a model whose replies do not stop at once.`,
    );
  const loneTiming = summarize(decoded.map((x) => 1000 / x));
  log(`serve: lone generation ${fmt(1000 / loneTiming.median)} tok/s (${loneRates.length} runs)`);

  log(`serve: ${o.clients} clients for ${fmt(o.durationMs / 1000, 0)} s against ${target.url}`);
  target.takeServedStats?.();
  const soak = await runSoak({
    url: target.url,
    model: target.model,
    ...(target.apiKey === undefined ? {} : { apiKey: target.apiKey }),
    clients: o.clients,
    durationMs: o.durationMs,
    maxTokens: o.maxTokens,
    request: requestOf,
    memory: () => target.memory(),
    sampleEveryMs: Math.max(250, Math.min(5000, o.durationMs / 12)),
    ...(o.signal === undefined ? {} : { signal: o.signal }),
    onProgress: log,
    progressEveryMs: Math.max(1000, Math.min(10_000, o.durationMs / 6)),
    ...(o.send === undefined ? {} : { send: o.send }),
  });

  const engineStats = target.takeServedStats?.();
  let prefix: PrefixResult | undefined;
  if (o.historyTokens > 0 && !soak.interrupted) {
    log(`serve: prefix reuse on a ${o.historyTokens}-word history, ${o.runs} run(s)`);
    prefix = await runPrefixReuse({
      server: {
        url: target.url,
        model: target.model,
        ...(target.apiKey === undefined ? {} : { apiKey: target.apiKey }),
        ...(o.signal === undefined ? {} : { signal: o.signal }),
      },
      historyTokens: o.historyTokens,
      replyTokens: Math.min(o.maxTokens, 32),
      runs: o.runs,
      promptTokens: (m) => target.promptTokens(m),
      forgetPrefix: () => target.forgetPrefix(),
      chat: (messages, maxTokens) => target.chat(messages, maxTokens),
      ...(o.send === undefined ? {} : { send: o.send }),
    });
  }
  const byVariant = variantComparison(
    o.promptLengths,
    variants.map((r) => r.promptTokens),
    loneByVariant,
    soak.records,
    engineStats,
  );
  return serveReport(
    o,
    soak,
    loneTiming,
    byVariant,
    engineStats,
    prefix,
    (performance.now() - started) / 1000,
  );
}

/** Greedy replies to one key that differ from the first reply to it (error-free streams only). */
export function divergentReplies(records: readonly RequestRecord[]): number {
  const first = new Map<string, string>();
  let divergent = 0;
  for (const r of records) {
    if (r.outcome.errors.length > 0) continue;
    const seen = first.get(r.key);
    if (seen === undefined) first.set(r.key, r.outcome.text);
    else if (seen !== r.outcome.text) divergent++;
  }
  return divergent;
}

/** Max − min of one memory field over the samples taken once every client had finished a request. */
function drift(soak: SoakResult, field: keyof MemorySample): number | undefined {
  const warm = soak.samples.filter((s) => soak.warmAt !== undefined && s.at >= soak.warmAt);
  const values = warm.map((s) => s[field]).filter((v): v is number => v !== undefined);
  return values.length < 2 ? undefined : Math.max(...values) - Math.min(...values);
}

/** One prompt length's decode speeds: lone generations, served requests (as received and as the engine timed them). */
export interface VariantComparison {
  /** Base prompt length in words. */
  readonly words: number;
  /** Tokens of client 0's prompt of this length. */
  readonly promptTokens: number;
  readonly lone: Summary;
  /** Tok/s of the served requests of this length as the clients received them (undefined: none finished). */
  readonly served?: Summary;
  /** The same requests as the engine timed them, matched by prompt length (undefined: no engine stats). */
  readonly engine?: Summary;
}

/**
 * Per prompt length, the lone generations beside the served requests of the same length. The prompt lengths decode
 * at different speeds (attention over more keys), so a median over the mixed requests can land between two
 * lengths' speeds and compare nothing with nothing; each length is compared with itself instead.
 */
export function variantComparison(
  words: readonly number[],
  promptTokens: readonly number[],
  loneByVariant: readonly (readonly number[])[],
  records: readonly RequestRecord[],
  engineStats: readonly ChatStats[] | undefined,
): VariantComparison[] {
  const servedByVariant: number[][] = words.map(() => []);
  for (const r of records) {
    if (r.outcome.errors.length > 0 || r.decodeTokPerS === undefined || !(r.decodeTokPerS > 0)) continue;
    const v = Number(r.key.split('/')[1]);
    if (Number.isInteger(v) && v >= 0 && v < words.length) servedByVariant[v]!.push(r.decodeTokPerS);
  }
  // Engine stats carry no key: each goes to the length whose prompt is nearest in tokens (clients' prompts of one
  // length differ by a few words; lengths differ by hundreds of tokens).
  const engineByVariant: number[][] = words.map(() => []);
  for (const st of engineStats ?? []) {
    if (st.promptTokens === undefined || !(st.decodeTokensPerSecond > 0)) continue;
    let best = 0;
    for (let v = 1; v < promptTokens.length; v++) {
      if (Math.abs(promptTokens[v]! - st.promptTokens) < Math.abs(promptTokens[best]! - st.promptTokens))
        best = v;
    }
    engineByVariant[best]!.push(st.decodeTokensPerSecond);
  }
  const out: VariantComparison[] = [];
  words.forEach((w, v) => {
    const lone = loneByVariant[v]!.filter((x) => x > 0);
    if (lone.length === 0) return;
    out.push({
      words: w,
      promptTokens: promptTokens[v]!,
      lone: summarize(lone),
      ...(servedByVariant[v]!.length === 0 ? {} : { served: summarize(servedByVariant[v]!) }),
      ...(engineByVariant[v]!.length === 0 ? {} : { engine: summarize(engineByVariant[v]!) }),
    });
  });
  return out;
}

function serveReport(
  o: ServeSuiteOptions,
  soak: SoakResult,
  lone: Summary,
  byVariant: readonly VariantComparison[],
  engineStats: readonly ChatStats[] | undefined,
  prefix: PrefixResult | undefined,
  seconds: number,
): BenchReport {
  const { target } = o;
  const ok = soak.records.filter((r) => r.outcome.errors.length === 0);
  const errorCounts = new Map<string, { count: number; example: string }>();
  for (const r of soak.records) {
    // A stream counts once per kind of problem it has.
    for (const kind of new Set(r.outcome.errors.map((e) => e.kind))) {
      const entry = errorCounts.get(kind) ?? {
        count: 0,
        example: r.outcome.errors.find((e) => e.kind === kind)!.message,
      };
      entry.count++;
      errorCounts.set(kind, entry);
    }
  }
  for (const e of prefix?.errors ?? []) {
    const entry = errorCounts.get(e.kind) ?? { count: 0, example: `prefix test, ${e.message}` };
    entry.count++;
    errorCounts.set(e.kind, entry);
  }
  const failed = soak.records.length - ok.length;
  const rates = ok.map((r) => r.decodeTokPerS).filter((x): x is number => x !== undefined);
  const ttfts = ok.map((r) => r.ttftMs).filter((x): x is number => x !== undefined);
  const tokens = ok.reduce((n, r) => n + (r.outcome.completionTokens ?? 0), 0);
  const aggregate = (1000 * tokens) / soak.wallMs;
  const divergent = divergentReplies(soak.records);
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const table: string[][] = [
    ['clients × duration', `${o.clients} × ${fmt(soak.wallMs / 1000)} s`, ''],
    [
      'requests completed (with errors)',
      `${soak.records.length} (${failed})`,
      failed === 0 ? 'no error ✓' : 'errors ✗',
    ],
    ['greedy replies that changed for the same prompt', String(divergent), ''],
    ['aggregate decode', `${fmt(aggregate)} tok/s (${tokens} tokens)`, ''],
  ];

  const loneTokPerS = 1000 / lone.median;
  rows.push({
    id: 'lone-decode',
    series: 'lone',
    label: "lone generation (model.chat, client 0's requests)",
    x: 1,
    params: { engine: target.engine, maxTokens: o.maxTokens, runs: lone.samples },
    timing: lone,
    tokPerS: loneTokPerS,
    peers: {},
  });
  table.push(['lone generation decode', `${fmt(loneTokPerS)} tok/s (median of ${lone.samples})`, '']);
  // The bar: each prompt length's served median against its own lone median; the worst length decides.
  const compared = byVariant.filter((c) => c.served !== undefined);
  const worst =
    compared.length === 0 ? undefined : Math.min(...compared.map((c) => c.served!.median / c.lone.median));
  for (const c of compared) {
    const ratio = c.served!.median / c.lone.median;
    const engine =
      c.engine === undefined
        ? ''
        : `; engine-timed ${fmt(c.engine.median)} = ${fmt(c.engine.median / c.lone.median, 2)}×`;
    table.push([
      `per-request decode, prompts of ~${c.words} words (${c.promptTokens} tokens): served median (${c.served!.samples} requests) vs lone (${c.lone.samples})`,
      `${fmt(c.served!.median)} vs ${fmt(c.lone.median)} tok/s = ${fmt(ratio, 2)}×${engine}`,
      ratio === worst ? `≥ ${SERVED_SPEED_BAR}× ${ratio >= SERVED_SPEED_BAR ? '✓' : '✗'} (worst length)` : '',
    ]);
  }
  if (rates.length > 0) {
    const perRequest = summarize(rates.map((x) => 1000 / x));
    const servedTokPerS = 1000 / perRequest.median;
    const met = worst !== undefined && worst >= SERVED_SPEED_BAR;
    const rateSpread = summarize(rates);
    rows.push({
      id: 'served-decode',
      series: 'served',
      label: `per-request decode, ${o.clients} clients`,
      x: o.clients,
      params: { engine: target.engine, clients: o.clients, maxTokens: o.maxTokens },
      timing: perRequest,
      tokPerS: servedTokPerS,
      // The ratio is the worst prompt length's (served median over lone median of the same length).
      peers: worst === undefined ? {} : { lone: { time: perRequest.median * worst, ratio: worst } },
      bar: { text: `≥ ${SERVED_SPEED_BAR}× a lone generation's tok/s at every prompt length`, met },
      extra: {
        tokPerSP10: rateSpread.p10,
        tokPerSP90: rateSpread.p90,
        // Per prompt length with served requests: the words, and the lone and served medians (tok/s).
        promptWords: compared.map((c) => c.words),
        loneTokPerSByLength: compared.map((c) => c.lone.median),
        servedTokPerSByLength: compared.map((c) => c.served!.median),
      },
    });
    table.push([
      'per-request decode p10 / median / p90 over every length (as the clients received it)',
      `${spread(rateSpread)} tok/s`,
      '',
    ]);
    const timed = engineStats?.map((x) => x.decodeTokensPerSecond).filter((x) => x > 0) ?? [];
    if (timed.length > 0) {
      const engine = summarize(timed);
      rows[rows.length - 1]!.extra!.engineTokPerS = engine.median;
      table.push([
        'per-request decode p10 / median / p90 over every length (as the engine timed it)',
        `${spread(engine)} tok/s`,
        '',
      ]);
    }
  }
  if (ttfts.length > 0) {
    const ttft = summarize(ttfts.map((x) => Math.max(x, 1e-3)));
    rows.push({
      id: 'served-ttft',
      series: 'served',
      label: 'time to first token, queue wait included',
      x: o.clients,
      params: { clients: o.clients },
      timing: ttft,
      peers: {},
    });
    table.push(['time to first token p10 / median / p90 (queue included)', `${spread(ttft, 0)} ms`, '']);
  }
  if (soak.records.length > 0) {
    // Failed requests count here too: the row carries the soak's counts and memory samples.
    const latency = summarize(soak.records.map((r) => Math.max(r.latencyMs, 1e-3)));
    rows.push({
      id: 'served-request',
      series: 'served',
      label: 'request, sent to the end of its stream',
      x: o.clients,
      params: { clients: o.clients },
      timing: latency,
      peers: {},
      extra: {
        requests: soak.records.length,
        failed,
        divergent,
        aggregateTokPerS: aggregate,
        tokens,
        ...memoryExtra(soak),
      },
    });
  }
  memoryLines(o, soak, table, notes);

  if (prefix !== undefined && prefix.warm.length > 0)
    prefixLines(prefix, rows, table, notes, o.clientsRunIn ?? 'this process');
  if (divergent > 0)
    notes.push(
      `${divergent} greedy replies differed from the first reply to the same prompt. On the cpu engine that means a mixed stream; on a GPU engine a reused prefix's rows can round differently from a full prefill's, which random weights amplify.`,
    );
  if (soak.interrupted) notes.push('Interrupted before the end: the numbers cover the part that ran.');
  const errorTable: BenchTable = {
    title: 'Stream errors by kind (a stream counts once per kind)',
    header: ['kind', 'streams', 'first seen'],
    numeric: [false, true, false],
    rows: STREAM_ERROR_KINDS.map((k) => [
      k,
      String(errorCounts.get(k)?.count ?? 0),
      errorCounts.get(k)?.example ?? '',
    ]),
  };
  return {
    schema: BENCH_SCHEMA,
    suite: o.name ?? 'serve',
    title: `Serving under ${o.clients} concurrent clients (${target.source}, ${target.engine})`,
    description: `qk serve's app in this process on ${target.url}, the model loaded once. ${o.clients} clients (in ${o.clientsRunIn ?? 'this process'}) each send one streaming /v1/chat/completions request after another for ${fmt(o.durationMs / 1000, 0)} s through Node's fetch (prompts of about ${o.promptLengths.join(', ')} words, max_tokens ${o.maxTokens}, temperature 0, thinking off); every stream is checked: JSON events, one id, object and model throughout, one finish reason, usage counting this request's prompt, [DONE] last. Per-request decode = (completion tokens − 1) over the time from the first text chunk to the finish chunk as the client receives them; requests queue FIFO on the one model, so each prompt length's median should match the lone generations of that length (model.chat, what qk generate runs, prefix forgotten) measured before the soak in the same run; the worst length is held to the bar. Time to first token includes the queue wait. Memory is sampled every few seconds; flat means max − min over the samples after every client finished its first request.`,
    backend: o.backend,
    status: 'ok',
    unit: 'ms',
    machine: o.machine ?? machineInfo(),
    peers: [
      { name: 'lone', label: 'lone generation', available: true },
      { name: 'cold', label: 'cold prefill', available: prefix !== undefined },
    ].map((p) => (p.available ? p : { ...p, reason: 'no prefix test (--history 0, or interrupted)' })),
    rows,
    charts: [],
    tables: [
      {
        title: 'Serving soak',
        header: ['measure', 'value', 'bar'],
        numeric: [false, true, false],
        rows: table,
      },
      errorTable,
    ],
    notes,
    ...(errorCounts.size > 0
      ? {
          errors: [...errorCounts].map(([kind, e]) => ({
            id: `stream-${kind}`,
            message: `${e.count} × ${e.example}`,
          })),
        }
      : {}),
    seconds,
  };
}

/**
 * The memory samples for the JSON, in MiB: the GPU's used memory where there is one (else the process RSS), and the
 * drifts after warm-up that the flatness bar judges.
 */
function memoryExtra(soak: SoakResult): Record<string, number | string | number[]> {
  const gpu = soak.samples[0]?.deviceUsedBytes !== undefined;
  const field = gpu ? 'deviceUsedBytes' : 'rssBytes';
  const used = drift(soak, field);
  const allocated = drift(soak, 'allocatedBytes');
  return {
    memory: gpu ? 'GPU used (cudaMemGetInfo)' : 'process RSS',
    memorySamplesMiB: soak.samples.map((s) => (s[field] ?? 0) / MiB),
    memorySampleSeconds: soak.samples.map((s) => (s.at - soak.startedAt) / 1000),
    ...(soak.warmAt === undefined ? {} : { memoryWarmAtSeconds: (soak.warmAt - soak.startedAt) / 1000 }),
    ...(used === undefined ? {} : { memoryDriftMiB: used / MiB }),
    ...(allocated === undefined ? {} : { allocatedDriftMiB: allocated / MiB }),
  };
}

/** The memory lines of the soak table: start, end and drift after warm-up; the flatness bar on the GPU. */
function memoryLines(o: ServeSuiteOptions, soak: SoakResult, table: string[][], notes: string[]): void {
  const first = soak.samples[0]!;
  const last = soak.samples[soak.samples.length - 1]!;
  const mib = (b: number | undefined) => (b === undefined ? '—' : `${fmt(b / MiB, 0)} MiB`);
  const count = `${soak.samples.length} samples`;
  if (first.deviceUsedBytes !== undefined) {
    const used = drift(soak, 'deviceUsedBytes');
    const allocated = drift(soak, 'allocatedBytes');
    const met = used === undefined ? null : used <= o.leakBytes;
    table.push(
      [
        'GPU memory used, start → end',
        `${mib(first.deviceUsedBytes)} → ${mib(last.deviceUsedBytes)} (${count})`,
        '',
      ],
      [
        'GPU memory used, max − min after warm-up',
        `${mib(used)} (allocator: allocated ${mib(allocated)})`,
        `≤ ${mib(o.leakBytes)} ${met === null ? '?' : met ? '✓' : '✗'}`,
      ],
    );
  } else {
    table.push([
      'process RSS, start → end; max − min after warm-up',
      `${mib(first.rssBytes)} → ${mib(last.rssBytes)}; ${mib(drift(soak, 'rssBytes'))} (${count})`,
      '',
    ]);
    notes.push(
      'No GPU: memory is the process RSS, which the garbage collector moves; no flatness bar is judged.',
    );
  }
  if (soak.warmAt === undefined)
    notes.push('Some client never finished a request, so no warm-up point was found.');
}

/** The prefix-reuse rows and table lines: turn 3 over HTTP reused vs cold (the bar), and through model.chat. */
function prefixLines(
  prefix: PrefixResult,
  rows: BenchRow[],
  table: string[][],
  notes: string[],
  clientRunsIn: string,
): void {
  const warm = summarize(prefix.warm.map((t) => Math.max(t.ttftMs, 1e-3)));
  const cold = summarize(prefix.cold.map((t) => Math.max(t.ttftMs, 1e-3)));
  const ratio = warm.median / cold.median;
  const cached = prefix.warm[0]!.cachedTokens;
  const coldCached = Math.max(...prefix.cold.map((t) => t.cachedTokens));
  const met = ratio < PREFIX_TTFT_BAR && cached > 0 && coldCached === 0;
  const params = { promptTokens: prefix.promptTokens, runs: prefix.warm.length };
  const warmRow: BenchRow = {
    id: 'prefix-warm',
    series: 'prefix',
    label: `turn 3 of a ${prefix.promptTokens}-token chat, prefix reused`,
    x: prefix.promptTokens,
    params: { ...params, cachedTokens: cached },
    timing: warm,
    peers: { cold: { time: cold.median, ratio: cold.median / warm.median } },
    bar: { text: `< ${PREFIX_TTFT_BAR * 100}% of a cold prefill's TTFT`, met },
  };
  const coldRow: BenchRow = {
    id: 'prefix-cold',
    series: 'prefix',
    label: 'the same prompt after forgetPrefix() (cold)',
    x: prefix.promptTokens,
    params: { ...params, cachedTokens: coldCached },
    timing: cold,
    peers: {},
  };
  rows.push(warmRow, coldRow);
  table.push([
    `prefix reuse: turn 3 TTFT (${prefix.promptTokens} tokens, ${cached} cached) vs cold`,
    `${fmt(warm.median, 2)} ms vs ${fmt(cold.median, 2)} ms = ${fmt(100 * ratio)}%`,
    `< ${PREFIX_TTFT_BAR * 100}% ${met ? '✓' : '✗'}`,
  ]);
  const library = prefix.library;
  if (library !== undefined) {
    const ms = (xs: readonly number[]) => summarize(xs.map((x) => Math.max(x, 1e-3))).median;
    const warmTtft = ms(library.warm.map((t) => t.timeToFirstTokenMs));
    const coldTtft = ms(library.cold.map((t) => t.timeToFirstTokenMs));
    const warmPrefill = ms(library.warm.map((t) => t.prefillMs));
    const coldPrefill = ms(library.cold.map((t) => t.prefillMs));
    table.push(
      [
        'the same through model.chat: TTFT reused vs cold',
        `${fmt(warmTtft, 2)} ms vs ${fmt(coldTtft, 2)} ms = ${fmt((100 * warmTtft) / coldTtft)}%`,
        '',
      ],
      [
        'model.chat prefill alone: reused vs cold',
        `${fmt(warmPrefill, 2)} ms vs ${fmt(coldPrefill, 2)} ms = ${fmt((100 * warmPrefill) / coldPrefill)}%`,
        '',
      ],
    );
    warmRow.extra = { libraryTtftMs: warmTtft, libraryPrefillMs: warmPrefill };
    coldRow.extra = { libraryTtftMs: coldTtft, libraryPrefillMs: coldPrefill };
  }
  notes.push(
    `Prefix reuse: the turns are sent by the soak's client (in ${clientRunsIn}); turn 3's requests ask for logprobs, so the server streams every token's chunk and the time to first token is the first token's arrival, even when that token completes no character yet (a byte of a longer one).`,
  );
  if (coldCached > 0)
    notes.push(`The cold turn 3 reused ${coldCached} cached tokens: forgetPrefix() did not take.`);
}
