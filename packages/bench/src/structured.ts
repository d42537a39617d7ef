/**
 * `structured`: what JSON-Schema-constrained generation costs, measured beside the same model's unconstrained
 * generation in the same run. Two kinds of rows:
 * - `compile`: the time from `generate({ schema })` to a ready constraint (the grammar compiled, its matcher
 *   started), for schemas of the kinds users write. Each run renames the schema's properties, so no grammar compiled
 *   before is reused: what a new schema costs once the model and its tokenizer's grammar data are warm (the first
 *   constrained call of a process also builds those, and is left out as a warm-up).
 * - `decode`: decode tokens/s under each schema (greedy: every step masks the logits and asks the matcher), with
 *   the unconstrained greedy rate of the same model as the peer; ratio = constrained rate / unconstrained rate.
 * - `controls`: decode tokens/s with sampling controls on (penalties, min-p, log-probabilities), with the same draw
 *   without them as the peer; ratio = controlled rate / plain rate.
 *
 * The bars are issue #50's: a compile ≤ 50 ms, constrained decode ≥ 85% of the unconstrained rate, and controls
 * costing ≤ 5% of the decode rate.
 */
import type { E2eCommon } from './e2e.js';
import { reportHeader } from './e2e.js';
import type { BenchReport, BenchRow, PeerStatus } from './schema.js';
import { summarize } from './stats.js';

/** What one generation reports (a subset of @qk/qwen3's GenerationStats). */
export interface StructuredStats {
  /** Time spent making the constraint (0 without a schema). */
  grammarMs: number;
  decodeTokensPerSecond: number;
  generatedTokens: number;
  finishReason: string;
}

/** How a `controls` run draws (greedy without a temperature), and the sampling controls it turns on. */
export interface StructuredDraw {
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly seed?: number;
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  readonly repetitionPenalty?: number;
  readonly minP?: number;
  /** Log-probabilities of each token and this many alternatives. */
  readonly topLogprobs?: number;
}

/** A loaded model as the structured suite uses it; the caller (the CLI) wraps @qk/qwen3. */
export interface StructuredModel {
  readonly engine: string;
  readonly source: string;
  /**
   * A generation of at most `maxTokens` tokens after `prompt`, greedy unless `draw` says otherwise; with `schema`,
   * constrained to it.
   */
  generate(
    prompt: string,
    maxTokens: number,
    schema?: object,
    draw?: StructuredDraw,
  ): Promise<StructuredStats>;
  dispose(): void;
}

export interface StructuredSuiteOptions extends Omit<E2eCommon, 'open' | 'hfCheckpoint' | 'peers'> {
  open: () => Promise<StructuredModel>;
  /** Tokens per decode run (default 128); a constrained run may end sooner, when its JSON is complete. */
  tokens?: number;
}

/** The compile bar, the decode bar and the controls bar of issue #50. */
export const STRUCTURED_BARS = { compileMs: 50, decodeRatio: 0.85, controlsRatio: 0.95 } as const;

/** Greedy: the peer of the greedy controls cases. */
const GREEDY: StructuredDraw = {};
/** Qwen3's recommended draw (`qk generate`'s default for the presets): the peer of the sampled controls cases. */
const SAMPLED: StructuredDraw = { temperature: 0.6, topK: 20, topP: 0.95, seed: 1 };

/**
 * The sampling-controls cases: each draw with its controls on, beside the same draw without them (`base`). Qwen3's
 * model card recommends a presence penalty of up to 2 against endless repetition.
 */
export const CONTROLS_CASES: ReadonlyArray<{ name: string; base: StructuredDraw; draw: StructuredDraw }> = [
  { name: 'greedy, presence penalty 1.5', base: GREEDY, draw: { presencePenalty: 1.5 } },
  {
    name: 'sampled, presence 1.5, frequency 0.2, repetition 1.05',
    base: SAMPLED,
    draw: { ...SAMPLED, presencePenalty: 1.5, frequencyPenalty: 0.2, repetitionPenalty: 1.05 },
  },
  { name: 'sampled, min-p 0.05', base: SAMPLED, draw: { ...SAMPLED, minP: 0.05 } },
  { name: 'greedy, logprobs (top 5)', base: GREEDY, draw: { topLogprobs: 5 } },
];

const PROMPT = 'Answer with one JSON object that fits the schema.\n';

/**
 * The schemas measured, as users write them: a flat record, a nested one (object, arrays, enums, bounded integers,
 * a pattern), a tool's arguments, and one bounded-length string (xgrammar 0.1.27 expands `maxLength`, the costly
 * case). `tag` renames every property, so each run compiles a grammar no cache holds.
 */
export const STRUCTURED_SCHEMAS: ReadonlyArray<{ name: string; schema: (tag: string) => object }> = [
  {
    name: 'flat',
    schema: (t) => ({
      type: 'object',
      properties: {
        [`name${t}`]: { type: 'string' },
        [`age${t}`]: { type: 'integer', minimum: 0, maximum: 150 },
        [`active${t}`]: { type: 'boolean' },
      },
      required: [`name${t}`, `age${t}`, `active${t}`],
      additionalProperties: false,
    }),
  },
  {
    name: 'nested',
    schema: (t) => ({
      type: 'object',
      properties: {
        [`id${t}`]: { type: 'integer', minimum: 1 },
        [`title${t}`]: { type: 'string' },
        [`status${t}`]: { enum: ['open', 'closed', 'blocked'] },
        [`owner${t}`]: {
          type: 'object',
          properties: {
            [`login${t}`]: { type: 'string', pattern: '^[a-z][a-z0-9-]{0,15}$' },
            [`admin${t}`]: { type: 'boolean' },
          },
          required: [`login${t}`],
          additionalProperties: false,
        },
        [`labels${t}`]: { type: 'array', items: { enum: ['bug', 'docs', 'perf'] }, maxItems: 3 },
        [`scores${t}`]: { type: 'array', items: { type: 'number' }, maxItems: 4 },
      },
      required: [`id${t}`, `title${t}`, `status${t}`, `owner${t}`],
      additionalProperties: false,
    }),
  },
  {
    name: 'tool arguments',
    schema: (t) => ({
      type: 'object',
      properties: {
        [`location${t}`]: { type: 'string' },
        [`unit${t}`]: { enum: ['celsius', 'fahrenheit'] },
        [`days${t}`]: { type: 'integer', minimum: 1, maximum: 14 },
      },
      required: [`location${t}`, `unit${t}`],
      additionalProperties: false,
    }),
  },
  {
    name: 'maxLength 24',
    schema: (t) => ({
      type: 'object',
      properties: { [`summary${t}`]: { type: 'string', maxLength: 24 } },
      required: [`summary${t}`],
      additionalProperties: false,
    }),
  },
];

const UNCONSTRAINED: PeerStatus = {
  name: 'unconstrained',
  label: 'unconstrained (same model and engine)',
  available: true,
};

const PLAIN: PeerStatus = {
  name: 'plain',
  label: 'the same draw without controls',
  available: true,
};

/** A property-name suffix no earlier run used. */
function uniqueTag(run: number): string {
  return `_${run.toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36)}`;
}

export async function runStructuredSuite(o: StructuredSuiteOptions): Promise<BenchReport> {
  const started = performance.now();
  const runs = o.runs ?? 3;
  const tokens = o.tokens ?? 128;
  const log = o.onProgress ?? (() => {});
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const model = await o.open();
  let run = 0;
  try {
    // Warm-up: the first constrained call loads the grammar engine and builds the tokenizer's data; the first
    // generations capture graphs and warm the allocator.
    await model.generate(PROMPT, 4, STRUCTURED_SCHEMAS[0]!.schema(uniqueTag(run++)));
    await model.generate(PROMPT, 8);
    const freeMsPerToken: number[] = [];
    for (let r = 0; r < runs; r++) {
      const s = await model.generate(PROMPT, tokens);
      if (s.decodeTokensPerSecond > 0) freeMsPerToken.push(1000 / s.decodeTokensPerSecond);
    }
    const free = freeMsPerToken.length > 0 ? summarize(freeMsPerToken) : undefined;
    log(`structured ${model.engine}: unconstrained ${free ? (1000 / free.median).toFixed(1) : '—'} tok/s`);
    for (const { name, schema } of STRUCTURED_SCHEMAS) {
      const compileMs: number[] = [];
      const msPerToken: number[] = [];
      const generated: number[] = [];
      for (let r = 0; r < runs; r++) {
        const s = await model.generate(PROMPT, tokens, schema(uniqueTag(run++)));
        compileMs.push(Math.max(s.grammarMs, 1e-3));
        generated.push(s.generatedTokens);
        if (s.decodeTokensPerSecond > 0) msPerToken.push(1000 / s.decodeTokensPerSecond);
      }
      const compile = summarize(compileMs);
      rows.push({
        id: `compile-${name.replace(/\W+/g, '-')}`,
        series: 'compile',
        label: `${name}: compile`,
        x: rows.length,
        params: { engine: model.engine, schema: name, runs },
        timing: compile,
        peers: {},
        bar: {
          text: `compile ≤ ${STRUCTURED_BARS.compileMs} ms`,
          met: compile.median <= STRUCTURED_BARS.compileMs,
        },
      });
      log(`structured ${name}: compile ${compile.median.toFixed(1)} ms`);
      if (msPerToken.length === 0) {
        notes.push(
          `${name}: no constrained run produced two tokens, so no decode rate (generated ${generated.join(', ')})`,
        );
        continue;
      }
      const decode = summarize(msPerToken);
      const ratio = free === undefined ? undefined : free.median / decode.median;
      rows.push({
        id: `decode-${name.replace(/\W+/g, '-')}`,
        series: 'decode',
        label: `${name}: decode`,
        x: rows.length,
        params: { engine: model.engine, schema: name, runs, tokens },
        timing: decode,
        tokPerS: 1000 / decode.median,
        peers: free === undefined ? {} : { unconstrained: { time: free.median, ratio: ratio! } },
        bar: {
          text: `≥ ${STRUCTURED_BARS.decodeRatio} × unconstrained`,
          met: ratio === undefined ? null : ratio >= STRUCTURED_BARS.decodeRatio,
        },
        extra: { generatedTokens: generated },
      });
      log(
        `structured ${name}: ${(1000 / decode.median).toFixed(1)} tok/s constrained${ratio === undefined ? '' : ` (${ratio.toFixed(2)} × unconstrained)`}`,
      );
    }
    // Sampling controls: each case against its draw without them, run by run in turns (so drift hits both alike).
    const bases = new Map<StructuredDraw, number[]>();
    for (const { base } of CONTROLS_CASES) bases.set(base, []);
    for (const { name, base, draw } of CONTROLS_CASES) {
      const on: number[] = [];
      const off = bases.get(base)!;
      for (let r = 0; r < runs; r++) {
        const plain = await model.generate(PROMPT, tokens, undefined, base);
        if (plain.decodeTokensPerSecond > 0) off.push(1000 / plain.decodeTokensPerSecond);
        const s = await model.generate(PROMPT, tokens, undefined, draw);
        if (s.decodeTokensPerSecond > 0) on.push(1000 / s.decodeTokensPerSecond);
      }
      if (on.length === 0 || off.length === 0) {
        notes.push(`${name}: no run produced two tokens, so no decode rate`);
        continue;
      }
      const timing = summarize(on);
      const peer = summarize(off).median;
      const ratio = peer / timing.median;
      rows.push({
        id: `controls-${name.replace(/\W+/g, '-')}`,
        series: 'controls',
        label: `${name}: decode`,
        x: rows.length,
        params: { engine: model.engine, controls: name, runs, tokens },
        timing,
        tokPerS: 1000 / timing.median,
        peers: { plain: { time: peer, ratio } },
        bar: {
          text: `≥ ${STRUCTURED_BARS.controlsRatio} × the same draw without controls`,
          met: ratio >= STRUCTURED_BARS.controlsRatio,
        },
      });
      log(`structured ${name}: ${(1000 / timing.median).toFixed(1)} tok/s (${ratio.toFixed(2)} × without)`);
    }
    return {
      ...reportHeader(
        o,
        'structured',
        `Structured output: grammar compile and constrained decode (${model.source}, ${model.engine})`,
        `Compile: from generate({ schema }) to a ready constraint, for a schema no earlier call compiled (its property names renamed per run; the grammar engine and the tokenizer's data warm), median of ${runs}. Decode: greedy tokens/s under each schema (each step masks the logits by the grammar), median of ${runs} runs of up to ${tokens} tokens (a constrained run ends when its JSON is complete), against the same model's unconstrained greedy rate in the same run (ratio = constrained / unconstrained). Controls: tokens/s with sampling controls on, against the same draw without them, the two alternating run by run (ratio = with / without; the plain runs of a draw are pooled across its cases). Unit: ms (per compile, per token).`,
        'ms',
      ),
      peers: [UNCONSTRAINED, PLAIN],
      rows,
      charts: [],
      notes,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    model.dispose();
  }
}
