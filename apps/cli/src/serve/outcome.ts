/**
 * What a request's generation reports: OpenAI's `usage` and finish reasons, the log line, and the response a
 * library error becomes.
 */
import { QkIndexError, QkValueError } from '@qk/ops';
import {
  type FinishReason,
  type Generation,
  type GenerationStats,
  QkBusyError,
  QkContextError,
} from '@qk/qwen3';
import { ApiError } from './errors.js';
import type { ChatRequest } from './request.js';

/** `usage` as OpenAI writes it. */
export function usageOf(stats: GenerationStats, completionTokens: number) {
  return {
    prompt_tokens: stats.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: stats.promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: stats.cachedPromptTokens ?? 0 },
  };
}

export const FINISH: Record<FinishReason, 'stop' | 'length'> = {
  stop: 'stop',
  'stop-string': 'stop',
  length: 'length',
  context: 'length',
  cancelled: 'stop',
};

/** What a finished or failed generation reports to the log. */
export function logLine(
  route: string,
  status: number,
  stats: GenerationStats | undefined,
  note = '',
): string {
  if (stats === undefined) return `${route} ${status}${note}`;
  return `${route} ${status} · prompt ${stats.promptTokens} (cached ${stats.cachedPromptTokens ?? 0}) · ${stats.generatedTokens} tokens · TTFT ${stats.timeToFirstTokenMs.toFixed(0)} ms · ${stats.decodeTokensPerSecond.toFixed(1)} tok/s · ${stats.finishReason}${note}`;
}

/** Turns a library error thrown before a generation starts into the response a client should see. */
export function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof QkContextError)
    return new ApiError(400, e.message, 'invalid_request_error', 'messages', 'context_length_exceeded');
  if (e instanceof QkValueError)
    // The library names its option; the client knows the request field.
    return new ApiError(
      400,
      e.message,
      'invalid_request_error',
      REQUEST_FIELD[e.arg] ?? null,
      'invalid_value',
    );
  if (e instanceof QkIndexError) return new ApiError(400, e.message);
  if (e instanceof QkBusyError)
    return new ApiError(503, e.message, 'server_error', null, 'model_unavailable');
  return new ApiError(500, e instanceof Error ? e.message : String(e), 'server_error');
}

/** Request fields by the library option they become, for errors the library finds. */
const REQUEST_FIELD: Record<string, string> = {
  schema: 'response_format',
  tools: 'tools',
  toolChoice: 'tool_choice',
  parallelToolCalls: 'parallel_tool_calls',
  logitBias: 'logit_bias',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  repetitionPenalty: 'repetition_penalty',
  minP: 'min_p',
  topLogprobs: 'top_logprobs',
};

/** One generation of a request, bound to its client: the client leaving aborts it. */
export interface Job {
  readonly id: string;
  readonly created: number;
  readonly generation: Generation;
  readonly thinking: 'maybe' | 'open' | 'off';
  readonly abort: AbortController;
  /** The tools whose calls the reply may hold; absent: none. */
  readonly tools?: ChatRequest['tools'];
}
