/**
 * The serving soak: C clients, each sending one streaming chat completion after another through Node's fetch for D
 * seconds, every stream read as it arrives and checked (stream-check.ts), and the server process's memory sampled
 * throughout. It knows the server only by its URL: the caller starts the server and says what each request is.
 */
import { checkChatStream, type SseEvent, SseReader, type StreamOutcome } from './stream-check.js';

/** One chat message as the request sends it. */
export interface SoakMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** A request a client sends: its messages, and what the server must count for them. */
export interface SoakRequest {
  readonly messages: readonly SoakMessage[];
  /** Same key, same messages: greedy replies to one key must match, so a mixed stream shows as a changed reply. */
  readonly key: string;
  /** Tokens of the rendered prompt (the chat template applied), as the server will count them. */
  readonly promptTokens: number;
  /**
   * Ask for per-token `logprobs`: the server then streams a chunk for every token, so the time to the first token is
   * seen even when that token completes no character (random weights often draw byte fragments).
   */
  readonly logprobs?: boolean;
  /** This request's `max_tokens`, in place of the soak's. */
  readonly maxTokens?: number;
}

/** Memory of the serving process at one moment, in bytes; what the machine can tell. */
export interface MemorySample {
  /** The GPU's used memory (total − free, cudaMemGetInfo). */
  readonly deviceUsedBytes?: number;
  /** Bytes the caching allocator has handed out, and holds from CUDA. */
  readonly allocatedBytes?: number;
  readonly reservedBytes?: number;
  /** The process's resident set. */
  readonly rssBytes: number;
}

export interface SoakOptions {
  /** The server's base URL (`http://127.0.0.1:PORT`). */
  readonly url: string;
  readonly model: string;
  readonly apiKey?: string;
  readonly clients: number;
  readonly durationMs: number;
  /** `max_tokens` of every request. */
  readonly maxTokens: number;
  /** The `index`-th request of client `client` (both from 0). */
  request(client: number, index: number): SoakRequest;
  /** Samples memory; called at the start, every {@link sampleEveryMs}, and at the end. */
  memory(): MemorySample;
  readonly sampleEveryMs: number;
  /** Stops the soak: no new requests, open streams are cut (and not counted). */
  readonly signal?: AbortSignal;
  readonly onProgress?: (line: string) => void;
  /** How often a progress line is printed (default 10 s). */
  readonly progressEveryMs?: number;
  /**
   * Sends one request and reads its stream (default: {@link sendChatStream} in this process). A caller can run the
   * clients elsewhere, e.g. in a child process, so that reading 16 streams does not share the server's event loop.
   * Must not throw: a failure is a record with an `http` error.
   */
  readonly send?: (request: SoakRequest, client: number) => Promise<RequestRecord>;
}

/** One finished request, as its client saw it. */
export interface RequestRecord {
  readonly client: number;
  readonly key: string;
  readonly outcome: StreamOutcome;
  /** From sending the request to its first token's chunk (the queue wait behind other clients included). */
  readonly ttftMs?: number;
  /** (completion tokens − 1) over the time from the first text to the finish reason. */
  readonly decodeTokPerS?: number;
  /** From sending to the end of the stream. */
  readonly latencyMs: number;
  /** `performance.now()` when the stream ended. */
  readonly endedAt: number;
}

export interface SoakResult {
  readonly records: RequestRecord[];
  /** From the first request sent to the last stream ended. */
  readonly wallMs: number;
  readonly samples: (MemorySample & { readonly at: number })[];
  /** When every client had finished its first request: samples from here on judge the memory's flatness. */
  readonly warmAt?: number;
  readonly startedAt: number;
  /** True when the signal stopped the soak early. */
  readonly interrupted: boolean;
}

/** Sends one streaming request and reads it to the end; never throws (a failure is an `http` error). */
export async function sendChatStream(
  options: Pick<SoakOptions, 'url' | 'model' | 'apiKey' | 'maxTokens' | 'signal'>,
  request: SoakRequest,
  client: number,
): Promise<RequestRecord> {
  const sentAt = performance.now();
  const maxTokens = request.maxTokens ?? options.maxTokens;
  const events: SseEvent[] = [];
  let outcome: StreamOutcome;
  try {
    const response = await fetch(`${options.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }),
      },
      body: JSON.stringify({
        model: options.model,
        messages: request.messages,
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: maxTokens,
        temperature: 0,
        enable_thinking: false,
        ...(request.logprobs === true ? { logprobs: true } : {}),
      }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    if (response.status !== 200 || response.body === null) {
      const body = (await response.text()).slice(0, 200);
      outcome = { errors: [{ kind: 'http', message: `status ${response.status}: ${body}` }], text: '' };
    } else {
      const reader = new SseReader();
      const decoder = new TextDecoder();
      for await (const bytes of response.body) {
        events.push(...reader.push(decoder.decode(bytes, { stream: true }), performance.now()));
      }
      events.push(...reader.push(`${decoder.decode()}\n\n`, performance.now()));
      outcome = checkChatStream(events, {
        model: options.model,
        promptTokens: request.promptTokens,
        maxTokens,
      });
    }
  } catch (e) {
    const cause = (e as { cause?: { message?: string } }).cause?.message;
    const message = `${(e as Error).message}${cause ? ` (${cause})` : ''}`;
    // A stream cut after it began is judged on what arrived (its connection ending is a no-done).
    outcome =
      events.length > 0
        ? checkChatStream(
            events,
            { model: options.model, promptTokens: request.promptTokens, maxTokens },
            false,
          )
        : { errors: [{ kind: 'http', message }], text: '' };
  }
  const endedAt = performance.now();
  const { firstTextAt, finishAt, completionTokens } = outcome;
  // A reply whose first token is a stop token has no text: its first token arrives with the finish reason. Without
  // logprobs a token that completes no character streams nothing, so its text's arrival stands in.
  const firstTokenAt = outcome.firstTokenAt ?? firstTextAt ?? finishAt;
  const decoded =
    firstTextAt !== undefined &&
    finishAt !== undefined &&
    completionTokens !== undefined &&
    completionTokens >= 2 &&
    finishAt > firstTextAt;
  return {
    client,
    key: request.key,
    outcome,
    ...(firstTokenAt === undefined ? {} : { ttftMs: firstTokenAt - sentAt }),
    ...(decoded ? { decodeTokPerS: ((completionTokens - 1) * 1000) / (finishAt - firstTextAt) } : {}),
    latencyMs: endedAt - sentAt,
    endedAt,
  };
}

const mib = (bytes: number | undefined) => (bytes === undefined ? '' : `${(bytes / 2 ** 20).toFixed(0)} MiB`);

/** Runs the soak to its end (or the signal); the records of streams the signal cut are left out. */
export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.onProgress ?? (() => {});
  const startedAt = performance.now();
  const deadline = startedAt + options.durationMs;
  const records: RequestRecord[] = [];
  const samples: SoakResult['samples'] = [];
  const sample = () => samples.push({ ...options.memory(), at: performance.now() });
  const firstDone = new Set<number>();
  let warmAt: number | undefined;
  sample();
  const sampler = setInterval(sample, options.sampleEveryMs);
  const progressEvery = options.progressEveryMs ?? 10_000;
  let nextProgress = startedAt + progressEvery;
  const progress = () => {
    const now = performance.now();
    if (now < nextProgress) return;
    nextProgress = now + progressEvery;
    const failed = records.filter((r) => r.outcome.errors.length > 0).length;
    const used = samples[samples.length - 1];
    log(
      `serve ${((now - startedAt) / 1000).toFixed(0)} s: ${records.length} requests, ${failed} with errors` +
        (used?.deviceUsedBytes === undefined ? '' : `, GPU ${mib(used.deviceUsedBytes)} used`),
    );
  };
  const client = async (c: number) => {
    for (let index = 0; performance.now() < deadline && !options.signal?.aborted; index++) {
      const request = options.request(c, index);
      const record = await (options.send?.(request, c) ?? sendChatStream(options, request, c));
      if (options.signal?.aborted) return;
      records.push(record);
      if (!firstDone.has(c)) {
        firstDone.add(c);
        if (firstDone.size === options.clients) warmAt = performance.now();
      }
      progress();
    }
  };
  try {
    await Promise.all(Array.from({ length: options.clients }, (_, c) => client(c)));
  } finally {
    clearInterval(sampler);
  }
  const wallMs = performance.now() - startedAt;
  sample();
  return {
    records,
    wallMs,
    samples,
    ...(warmAt === undefined ? {} : { warmAt }),
    startedAt,
    interrupted: options.signal?.aborted ?? false,
  };
}
