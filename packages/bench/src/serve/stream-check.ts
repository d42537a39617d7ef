/**
 * Reading and checking one streamed `/v1/chat/completions` response as an OpenAI client would: the SSE events as
 * they arrive (with their arrival times, for time to first token and decode speed), then every rule a well-formed
 * stream keeps. The serving soak counts what this finds by kind, so one broken stream among thousands shows.
 */

/** One `data:` event of an SSE body and when it arrived (`performance.now()` ms). */
export interface SseEvent {
  readonly data: string;
  readonly at: number;
}

/**
 * Splits an SSE body into events as its bytes arrive. Events end at a blank line; a `data:` field may be split
 * across network chunks, and comment lines (`: keep-alive`) carry nothing.
 */
export class SseReader {
  #buffer = '';
  #data: string[] = [];

  /** Feeds decoded text; returns the events it completed, stamped `at`. */
  push(text: string, at: number): SseEvent[] {
    this.#buffer += text;
    const events: SseEvent[] = [];
    let newline = this.#buffer.search(/\r?\n/);
    while (newline >= 0) {
      const line = this.#buffer.slice(0, newline);
      const skip = this.#buffer[newline] === '\r' ? 2 : 1;
      this.#buffer = this.#buffer.slice(newline + skip);
      if (line === '') {
        if (this.#data.length > 0) events.push({ data: this.#data.join('\n'), at });
        this.#data = [];
      } else if (line.startsWith('data:')) {
        this.#data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      }
      newline = this.#buffer.search(/\r?\n/);
    }
    return events;
  }

  /** Text left that no blank line ended (a stream cut mid-event leaves some). */
  get pending(): string {
    return this.#buffer + this.#data.join('\n');
  }
}

/** Every way a stream can go wrong, as the soak counts them. */
export const STREAM_ERROR_KINDS = [
  'http', // a status other than 200, or fetch itself failed
  'parse', // an event that is not JSON (nor [DONE])
  'api-error', // an OpenAI error object in the stream
  'no-done', // the stream ended without [DONE], or data followed it
  'no-finish', // no chunk carried a finish_reason, or more than one did
  'no-usage', // no usage, or usage that does not add up
  'mixed', // a chunk of another response: its id, object or model differ, or usage counts another prompt
] as const;
export type StreamErrorKind = (typeof STREAM_ERROR_KINDS)[number];

/** A problem found in one stream. */
export interface StreamError {
  readonly kind: StreamErrorKind;
  readonly message: string;
}

/** What the request promised, to hold the stream to. */
export interface StreamExpectation {
  readonly model: string;
  /** Tokens of this request's rendered prompt: a usage that counts another number belongs to another request. */
  readonly promptTokens: number;
  readonly maxTokens: number;
}

/** What one checked stream delivered. */
export interface StreamOutcome {
  readonly errors: StreamError[];
  /** The response id every chunk carried (the first one seen). */
  readonly id?: string;
  /** Reasoning and answer text, joined in order. */
  readonly text: string;
  /** Arrival of the first chunk with text, and of the chunk that carried the finish reason. */
  readonly firstTextAt?: number;
  /**
   * Arrival of the first chunk that carried a token: text, or per-token `logprobs` (a stream that asked for them
   * gets a chunk for every token, also one that completes no character yet, such as a byte of a longer one).
   */
  readonly firstTokenAt?: number;
  readonly finishAt?: number;
  readonly finishReason?: string;
  readonly promptTokens?: number;
  readonly completionTokens?: number;
  readonly cachedTokens?: number;
}

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
}

const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

/**
 * Checks the events of one chat completion stream: each is JSON until a final `[DONE]`, no error object, one
 * response id, object and model throughout, one finish reason, and usage whose prompt count is this request's, whose
 * completion count respects `max_tokens` (and reaches it when the reason is `length`), and whose total adds up.
 * `ended` says whether the body ended cleanly (a reset connection is a `no-done`).
 */
export function checkChatStream(
  events: readonly SseEvent[],
  expect: StreamExpectation,
  ended = true,
): StreamOutcome {
  const errors: StreamError[] = [];
  const fail = (kind: StreamErrorKind, message: string) => errors.push({ kind, message });
  let id: string | undefined;
  let text = '';
  let firstTextAt: number | undefined;
  let firstTokenAt: number | undefined;
  let finishAt: number | undefined;
  let finishReason: string | undefined;
  let usage: Usage | undefined;
  let done = false;
  for (const [i, event] of events.entries()) {
    if (done) {
      fail('no-done', `event ${i} came after [DONE]`);
      break;
    }
    if (event.data === '[DONE]') {
      done = true;
      continue;
    }
    let chunk: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(event.data);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new Error('not an object');
      chunk = parsed as Record<string, unknown>;
    } catch (e) {
      fail('parse', `event ${i} is not a JSON object (${(e as Error).message}): ${event.data.slice(0, 80)}`);
      continue;
    }
    if (chunk.error !== undefined) {
      const message = (chunk.error as { message?: unknown })?.message;
      fail('api-error', `event ${i}: ${typeof message === 'string' ? message : JSON.stringify(chunk.error)}`);
      continue;
    }
    if (typeof chunk.id !== 'string' || chunk.id === '') fail('mixed', `event ${i} has no id`);
    else if (id === undefined) id = chunk.id;
    else if (chunk.id !== id) fail('mixed', `event ${i} belongs to ${chunk.id}, not ${id}`);
    if (chunk.object !== 'chat.completion.chunk')
      fail('mixed', `event ${i} is a ${JSON.stringify(chunk.object)}, not a chat.completion.chunk`);
    if (chunk.model !== expect.model)
      fail('mixed', `event ${i} names model ${JSON.stringify(chunk.model)}, not ${expect.model}`);
    if (chunk.usage !== undefined && chunk.usage !== null) {
      if (usage !== undefined) fail('no-usage', `event ${i} carries a second usage`);
      usage = chunk.usage as Usage;
    }
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    for (const choice of choices as {
      delta?: Record<string, unknown>;
      logprobs?: { content?: unknown } | null;
      finish_reason?: unknown;
    }[]) {
      const delta = choice.delta ?? {};
      const scored = Array.isArray(choice.logprobs?.content) && choice.logprobs.content.length > 0;
      if (scored && finishAt === undefined) firstTokenAt ??= event.at;
      const piece =
        (typeof delta.reasoning_content === 'string' ? delta.reasoning_content : '') +
        (typeof delta.content === 'string' ? delta.content : '');
      if (piece.length > 0) {
        if (finishAt !== undefined) fail('no-finish', `event ${i} carries text after the finish reason`);
        text += piece;
        firstTextAt ??= event.at;
        firstTokenAt ??= event.at;
      }
      if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
        if (finishReason !== undefined) fail('no-finish', `event ${i} carries a second finish reason`);
        else {
          finishReason = String(choice.finish_reason);
          finishAt = event.at;
        }
      }
    }
  }
  if (!done) fail('no-done', ended ? 'the stream ended without [DONE]' : 'the connection ended mid-stream');
  if (finishReason === undefined) fail('no-finish', 'no chunk carried a finish_reason');
  let promptTokens: number | undefined;
  let completionTokens: number | undefined;
  let cachedTokens: number | undefined;
  if (usage === undefined) fail('no-usage', 'no chunk carried usage');
  else {
    const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = usage;
    const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
    if (!isCount(p) || !isCount(c) || !isCount(t) || !isCount(cached))
      fail('no-usage', `usage is not made of token counts: ${JSON.stringify(usage)}`);
    else {
      promptTokens = p;
      completionTokens = c;
      cachedTokens = cached;
      if (t !== p + c) fail('no-usage', `usage total ${t} is not prompt ${p} + completion ${c}`);
      if (cached > p) fail('no-usage', `usage says ${cached} cached tokens of a ${p}-token prompt`);
      if (p !== expect.promptTokens)
        fail('mixed', `usage counts a ${p}-token prompt; this request's has ${expect.promptTokens}`);
      if (c > expect.maxTokens)
        fail('no-usage', `usage counts ${c} completion tokens for max_tokens ${expect.maxTokens}`);
      if (finishReason === 'length' && c !== expect.maxTokens)
        fail('no-usage', `finish_reason length after ${c} tokens, not max_tokens ${expect.maxTokens}`);
    }
  }
  return {
    errors,
    text,
    ...(id === undefined ? {} : { id }),
    ...(firstTextAt === undefined ? {} : { firstTextAt }),
    ...(firstTokenAt === undefined ? {} : { firstTokenAt }),
    ...(finishAt === undefined ? {} : { finishAt }),
    ...(finishReason === undefined ? {} : { finishReason }),
    ...(promptTokens === undefined ? {} : { promptTokens }),
    ...(completionTokens === undefined ? {} : { completionTokens }),
    ...(cachedTokens === undefined ? {} : { cachedTokens }),
  };
}
