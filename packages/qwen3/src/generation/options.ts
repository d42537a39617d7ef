/** The options of a generation, their defaults, and the sampling defaults a model directory may carry. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { QkValueError } from '@qk/ops';
import { QkCheckpointError } from '../errors.js';
import type { SamplingParams } from '../types.js';

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
  return { maxTokens, sampling: { temperature, topK, topP, seed }, stop, signal: o.signal };
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
      `"${key}" must be a number, got ${JSON.stringify(v)}; fix or delete the file.`,
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
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      return { sampling: QWEN3_SAMPLING_DEFAULTS, eosTokenIds: [] };
    throw new QkCheckpointError(`cannot be read (${(e as Error).message}).`, file);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new QkCheckpointError(`is not valid JSON (${(e as Error).message}); fix or delete the file.`, file);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new QkCheckpointError('must hold a JSON object; fix or delete the file.', file);
  }
  const j = json as Record<string, unknown>;
  const d = QWEN3_SAMPLING_DEFAULTS;
  const greedy = j.do_sample === false;
  const topP = numberField(j, 'top_p', file) ?? d.topP;
  const sampling: SamplingDefaults = {
    temperature: greedy ? 0 : (numberField(j, 'temperature', file) ?? d.temperature),
    topK: numberField(j, 'top_k', file) ?? d.topK,
    topP: topP > 0 && topP <= 1 ? topP : d.topP,
  };
  const eos = j.eos_token_id;
  const eosTokenIds = (Array.isArray(eos) ? eos : eos === undefined || eos === null ? [] : [eos]).filter(
    (id): id is number => Number.isSafeInteger(id) && (id as number) >= 0,
  );
  return { sampling, eosTokenIds };
}
