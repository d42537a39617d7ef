/** The options of a generation, their defaults, and the sampling defaults a model directory may carry. */
import { join } from 'node:path';
import { MAX_TOP_LOGPROBS, QkValueError } from '@qk/ops';
import { checkLogitControls } from '../engine/common.js';
import { QkCheckpointError } from '../errors.js';
import type { SamplingParams } from '../types.js';
import { describeValue, LIMITS, readUntrustedJson } from '../untrusted.js';
import type { TokenConstraint } from './constraint.js';

/** Options of `Qwen3Model.generate` and `Qwen3Model.chat`. */
export interface GenerateOptions {
  /**
   * Most tokens to generate (a positive integer). Default 256. When the prompt leaves less room in the context,
   * the limit shrinks to fit (see `GenerationStats.maxTokens`) and a generation that fills the context ends with
   * `finishReason: 'context'`.
   */
  readonly maxTokens?: number;
  /**
   * Softmax temperature; 0 is greedy (argmax). Default: the model's {@link SamplingDefaults} (the directory's
   * `generation_config.json`, else Qwen3's recommended 0.6).
   */
  readonly temperature?: number;
  /** Sample among the `topK` most likely tokens; 0 keeps all. Default: the model's (Qwen3's recommended 20). */
  readonly topK?: number;
  /** Nucleus sampling threshold in (0, 1]; 1 keeps all. Default: the model's (Qwen3's recommended 0.95). */
  readonly topP?: number;
  /** Seed of the sampler (a non-negative safe integer). Default 0, so a run repeats exactly; vary it for variety. */
  readonly seed?: number;
  /** Strings that end the generation; the stop string itself is not part of the text. Default none. */
  readonly stop?: readonly string[];
  /** Aborts the generation: its iterator and `result` reject with `QkAbortError`. Default none. */
  readonly signal?: AbortSignal;
  /**
   * Subtracted once from the logit of every token the generation has already produced (OpenAI's
   * `presence_penalty`), in [-2, 2]. Default 0 (off). Qwen3's model card recommends a value between 0 and 2 (1.5
   * for its quantized models) against endless repetition; higher values can mix languages into the text.
   */
  readonly presencePenalty?: number;
  /**
   * Subtracted from the logit of every generated token once per time it occurred (OpenAI's `frequency_penalty`), in
   * [-2, 2]. Default 0 (off).
   */
  readonly frequencyPenalty?: number;
  /**
   * HF's `repetition_penalty`, > 0: every token of the prompt or the generated text has its logit divided by it when
   * positive and multiplied by it when negative, so values above 1 discourage repeats. Default 1 (off).
   */
  readonly repetitionPenalty?: number;
  /**
   * Min-p sampling, in [0, 1]: tokens whose probability (at the temperature) is below `minP` times the most likely
   * token's are dropped before top-k / top-p. Default 0 (off); ignored when greedy.
   */
  readonly minP?: number;
  /**
   * Token id → value in [-100, 100] added to that token's logit before sampling (OpenAI's `logit_bias`; -100 all
   * but bans a token, +100 all but forces it). A `Map` or a plain object with id keys (`{ "1234": -100 }`). Ids
   * must lie in the model's vocabulary. Default none.
   */
  readonly logitBias?: ReadonlyMap<number, number> | Readonly<Record<string, number>>;
  /**
   * Report the log-probability of each generated token under the model's own distribution (the raw logits' softmax,
   * before penalties, bias, constraint and temperature): in `GenerationResult.logprobs` and in each chunk of
   * `Generation.chunks()`. Default false.
   */
  readonly logprobs?: boolean;
  /**
   * Also report the `topLogprobs` most likely tokens at each step (an integer 0–20; implies `logprobs`). Default 0.
   */
  readonly topLogprobs?: number;
  /**
   * Restricts every step to the tokens the constraint allows (a JSON schema, a grammar, a hand-written rule): its
   * mask is applied where the engine samples, and the generation ends with finish reason `'stop'` once
   * `isComplete()`. Greedy decoding then takes the most likely allowed token. Default none.
   */
  readonly constraint?: TokenConstraint;
}

/** Sampling defaults of a model: what {@link GenerateOptions} falls back to. */
export interface SamplingDefaults {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
}

/** Qwen3's published recommendation (its `generation_config.json`): temperature 0.6, top-k 20, top-p 0.95. */
export const QWEN3_SAMPLING_DEFAULTS: SamplingDefaults = Object.freeze({
  temperature: 0.6,
  topK: 20,
  topP: 0.95,
});

/** {@link GenerateOptions.maxTokens}'s default. */
export const DEFAULT_MAX_TOKENS = 256;

/** Options after defaults and checks. */
export interface ResolvedGenerateOptions {
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly stop: readonly string[];
  readonly signal: AbortSignal | undefined;
  readonly constraint: TokenConstraint | undefined;
  /** Alternatives to report per token, or `null` when log-probabilities were not asked for. */
  readonly topLogprobs: number | null;
}

/** The most alternatives {@link GenerateOptions.topLogprobs} can ask for (OpenAI's limit, `@qk/ops`' too). */
export { MAX_TOP_LOGPROBS };

/** `logitBias` as a checked map; ids at or past `vocabSize` (when given) are refused. */
function resolveLogitBias(
  op: string,
  bias: GenerateOptions['logitBias'],
  vocabSize: number | undefined,
): ReadonlyMap<number, number> | undefined {
  if (bias === undefined) return undefined;
  if (bias === null || typeof bias !== 'object' || Array.isArray(bias)) {
    throw new QkValueError(op, 'logitBias', 'must be a Map or an object of token id → bias.');
  }
  const entries: [unknown, unknown][] =
    bias instanceof Map
      ? [...bias]
      : Object.entries(bias).map(([k, v]) => [/^\d+$/.test(k) ? Number(k) : k, v]);
  const map = new Map<number, number>();
  for (const [id, value] of entries) {
    if (
      typeof id !== 'number' ||
      !Number.isSafeInteger(id) ||
      id < 0 ||
      (vocabSize !== undefined && id >= vocabSize)
    ) {
      throw new QkValueError(
        op,
        'logitBias',
        `has key ${JSON.stringify(id)}; keys must be token ids in [0, ${vocabSize ?? 'vocab'}).`,
      );
    }
    if (typeof value !== 'number' || !Number.isFinite(value) || value < -100 || value > 100) {
      throw new QkValueError(
        op,
        'logitBias',
        `maps token ${id} to ${String(value)}; biases must lie in [-100, 100] (-100 all but bans a token).`,
      );
    }
    if (value !== 0) map.set(id, value);
  }
  return map.size > 0 ? map : undefined;
}

function isConstraint(c: unknown): c is TokenConstraint {
  const o = c as Partial<TokenConstraint> | null;
  return (
    typeof o === 'object' &&
    o !== null &&
    typeof o.nextMask === 'function' &&
    typeof o.accept === 'function' &&
    typeof o.isComplete === 'function'
  );
}

/**
 * Applies `defaults` and checks every option.
 *
 * @throws QkValueError naming the first option out of range.
 */
export function resolveGenerateOptions(
  op: string,
  options: GenerateOptions | undefined,
  defaults: SamplingDefaults,
  vocabSize?: number,
): ResolvedGenerateOptions {
  const o = options ?? {};
  if (typeof o !== 'object')
    throw new QkValueError(op, 'options', 'must be an object of generation options.');
  const maxTokens = o.maxTokens ?? DEFAULT_MAX_TOKENS;
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw new QkValueError(op, 'maxTokens', `must be a positive integer, got ${maxTokens}.`);
  }
  const temperature = o.temperature ?? defaults.temperature;
  if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
    throw new QkValueError(
      op,
      'temperature',
      `must be a finite number >= 0 (0 means greedy), got ${temperature}.`,
    );
  }
  const topK = o.topK ?? defaults.topK;
  if (!Number.isSafeInteger(topK) || topK < 0) {
    throw new QkValueError(op, 'topK', `must be a non-negative integer (0 keeps every token), got ${topK}.`);
  }
  const topP = o.topP ?? defaults.topP;
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) {
    throw new QkValueError(op, 'topP', `must lie in (0, 1] (1 keeps every token), got ${topP}.`);
  }
  const seed = o.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new QkValueError(op, 'seed', `must be a non-negative safe integer, got ${seed}.`);
  }
  const stop = o.stop ?? [];
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string')) {
    throw new QkValueError(op, 'stop', 'must be an array of strings.');
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new QkValueError(op, 'signal', 'must be an AbortSignal.');
  }
  const sampling: SamplingParams = {
    temperature,
    topK,
    topP,
    seed,
    ...optionalNumber('presencePenalty', o.presencePenalty, 0),
    ...optionalNumber('frequencyPenalty', o.frequencyPenalty, 0),
    ...optionalNumber('repetitionPenalty', o.repetitionPenalty, 1),
    ...optionalNumber('minP', o.minP, 0),
  };
  const logitBias = resolveLogitBias(op, o.logitBias, vocabSize);
  // The engine's checks name the option and its range (the same sentence whether set here or on an engine).
  checkLogitControls(op, sampling);
  if (o.logprobs !== undefined && typeof o.logprobs !== 'boolean') {
    throw new QkValueError(op, 'logprobs', `must be true or false, got ${describeValue(o.logprobs)}.`);
  }
  const top = o.topLogprobs ?? 0;
  if (!Number.isSafeInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS) {
    throw new QkValueError(
      op,
      'topLogprobs',
      `must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${describeValue(o.topLogprobs)}.`,
    );
  }
  if (o.constraint !== undefined && !isConstraint(o.constraint)) {
    throw new QkValueError(
      op,
      'constraint',
      'must implement TokenConstraint: nextMask(), accept(token) and isComplete().',
    );
  }
  return {
    maxTokens,
    sampling: logitBias === undefined ? sampling : { ...sampling, logitBias },
    stop,
    signal: o.signal,
    constraint: o.constraint,
    topLogprobs: o.logprobs === true || top > 0 ? top : null,
  };
}

/** `{ [key]: value }` when `value` is set and not `off` (the engines skip work for controls left off), else `{}`. */
function optionalNumber(key: string, value: number | undefined, off: number): Record<string, number> {
  return value === undefined || value === off ? {} : { [key]: value };
}

/** What a model directory's `generation_config.json` contributes. */
export interface DirectoryGenerationConfig {
  readonly sampling: SamplingDefaults;
  /** `eos_token_id` of the file (one or several); empty when absent. */
  readonly eosTokenIds: readonly number[];
}

function numberField(json: Record<string, unknown>, key: string, file: string): number | undefined {
  const v = json[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new QkCheckpointError(
      `"${key}" must be a number, got ${describeValue(v)}; fix or delete the file.`,
      file,
    );
  }
  return v;
}

/**
 * Reads `generation_config.json` from `dir` when there is one: its `temperature`, `top_k`, `top_p` (missing ones
 * fall back to {@link QWEN3_SAMPLING_DEFAULTS}; `do_sample: false` means greedy) and `eos_token_id`.
 *
 * @throws QkCheckpointError when the file exists but is not valid JSON or holds values of the wrong type.
 */
export async function readGenerationConfig(dir: string): Promise<DirectoryGenerationConfig> {
  const file = join(dir, 'generation_config.json');
  const json = await readUntrustedJson(
    file,
    LIMITS.configBytes,
    (reason) => new QkCheckpointError(`${reason}; fix or delete the file.`, file),
  );
  if (json === undefined) return { sampling: QWEN3_SAMPLING_DEFAULTS, eosTokenIds: [] };
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new QkCheckpointError('must hold a JSON object; fix or delete the file.', file);
  }
  const j = json as Record<string, unknown>;
  const d = QWEN3_SAMPLING_DEFAULTS;
  const greedy = j.do_sample === false;
  const field = (key: string, valid: (x: number) => boolean, range: string): number | undefined => {
    const value = numberField(j, key, file);
    if (value !== undefined && !valid(value)) {
      throw new QkCheckpointError(
        `"${key}" is ${value}, outside ${range}; fix or delete the file (qk does not replace it with a default).`,
        file,
      );
    }
    return value;
  };
  const temperature = field('temperature', (x) => x >= 0, '[0, ∞) (0 is greedy)');
  const topK = field(
    'top_k',
    (x) => Number.isSafeInteger(x) && x >= 0,
    'the non-negative integers (0 keeps all)',
  );
  const topP = field('top_p', (x) => x > 0 && x <= 1, '(0, 1]');
  const sampling: SamplingDefaults = {
    temperature: greedy ? 0 : (temperature ?? d.temperature),
    topK: topK ?? d.topK,
    topP: topP ?? d.topP,
  };
  const eos = j.eos_token_id;
  const eosList: unknown[] = Array.isArray(eos) ? eos : eos === undefined || eos === null ? [] : [eos];
  const bad = eosList.find((id) => !Number.isSafeInteger(id) || (id as number) < 0);
  if (bad !== undefined) {
    throw new QkCheckpointError(
      `"eos_token_id" must be a token id or a list of them, got ${describeValue(bad)} in it; fix or delete the file.`,
      file,
    );
  }
  const eosTokenIds = eosList as number[];
  return { sampling, eosTokenIds };
}
