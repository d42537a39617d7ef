/**
 * The OpenAI-compatible HTTP API over one loaded model: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `GET /v1/models`, `GET /health`. Requests take turns on the model in arrival order (its own FIFO queue); a client
 * that goes away aborts its generation, queued or running.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { QkError, QkIndexError, QkValueError } from '@qk/ops';
import {
  type ChatMessage,
  type FinishReason,
  type GenerateOptions,
  type Generation,
  type GenerationStats,
  QkAbortError,
  QkBusyError,
  QkContextError,
  type Qwen3Model,
} from '@qk/qwen3';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ApiError, invalidParam } from './errors.js';
import { originGuard } from './origin.js';
import {
  type ChatRequest,
  type CompletionRequest,
  parseChatRequest,
  parseCompletionRequest,
  parseJsonBody,
  type SamplingRequest,
} from './request.js';
import { type SplitText, ThinkingSplitter } from './thinking.js';

/** Options of {@link createServeApp}. */
export interface ServeAppOptions {
  readonly model: Qwen3Model;
  /** The id clients name in `model` and `GET /v1/models` lists. */
  readonly modelId: string;
  /** When set, every route wants `Authorization: Bearer <apiKey>`. */
  readonly apiKey?: string;
  /** Largest request body in bytes (413 above). */
  readonly maxBodyBytes: number;
  /** Longest prompt in tokens, the rendered chat included (400 above). */
  readonly maxPromptTokens: number;
  /** Largest `max_tokens` a request may ask for (400 above). */
  readonly maxTokensLimit: number;
  /** Most requests running or waiting for the model at once (429 above). */
  readonly maxQueue: number;
  /** What a request that leaves them out gets: `maxTokens`, sampling, and Qwen3's thinking mode. */
  readonly defaults: GenerateOptions & { readonly maxTokens: number; readonly enableThinking: boolean };
  /**
   * Origins of web pages that may call the API from a browser besides the server's own page (`'*'`: any). Default
   * none.
   */
  readonly allowedOrigins?: readonly string[];
  /** Whether the server listens on a loopback interface only (its own page then has a loopback host name). */
  readonly loopbackOnly?: boolean;
  /** One line per request (status, tokens, speed); default none. */
  readonly log?: (line: string) => void;
  /** Extra routes mounted before the API's and outside the API key (the demo page's files). */
  readonly extraRoutes?: (app: Hono) => void;
}

/** `usage` as OpenAI writes it. */
function usageOf(stats: GenerationStats, completionTokens: number) {
  return {
    prompt_tokens: stats.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: stats.promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: stats.cachedPromptTokens ?? 0 },
  };
}

const FINISH: Record<FinishReason, 'stop' | 'length'> = {
  stop: 'stop',
  'stop-string': 'stop',
  length: 'length',
  context: 'length',
  cancelled: 'stop',
};

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  // Compare in constant time; lengths differing says nothing an attacker could not count anyway.
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether the tokenizer can keep message text from turning into control tokens (the Hugging Face one can). */
interface ChatEncoder {
  encodeChat(messages: readonly ChatMessage[], options: { enableThinking: boolean }): number[];
}

function chatPromptIds(
  model: Qwen3Model,
  messages: readonly ChatMessage[],
  enableThinking: boolean,
): number[] {
  const tokenizer = model.tokenizer as Qwen3Model['tokenizer'] & Partial<ChatEncoder>;
  const options = { addGenerationPrompt: true, enableThinking };
  return typeof tokenizer.encodeChat === 'function'
    ? tokenizer.encodeChat(messages, options)
    : tokenizer.encode(tokenizer.applyChatTemplate(messages, options));
}

/** What a finished or failed generation reports to the log. */
function logLine(route: string, status: number, stats: GenerationStats | undefined, note = ''): string {
  if (stats === undefined) return `${route} ${status}${note}`;
  return `${route} ${status} · prompt ${stats.promptTokens} (cached ${stats.cachedPromptTokens ?? 0}) · ${stats.generatedTokens} tokens · TTFT ${stats.timeToFirstTokenMs.toFixed(0)} ms · ${stats.decodeTokensPerSecond.toFixed(1)} tok/s · ${stats.finishReason}${note}`;
}

/** Turns a library error thrown before a generation starts into the response a client should see. */
function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof QkContextError)
    return new ApiError(400, e.message, 'invalid_request_error', 'messages', 'context_length_exceeded');
  if (e instanceof QkValueError || e instanceof QkIndexError) return new ApiError(400, e.message);
  if (e instanceof QkBusyError)
    return new ApiError(503, e.message, 'server_error', null, 'model_unavailable');
  return new ApiError(500, e instanceof Error ? e.message : String(e), 'server_error');
}

/** One generation of a request, bound to its client: the client leaving aborts it. */
interface Job {
  readonly id: string;
  readonly created: number;
  readonly generation: Generation;
  readonly thinking: 'maybe' | 'open' | 'off';
  readonly abort: AbortController;
}

/** Builds the app; serve it with `@hono/node-server` (see server.ts). */
export function createServeApp(options: ServeAppOptions): Hono {
  const { model, modelId, log } = options;
  const app = new Hono();
  let active = 0;

  app.onError((e, c) => {
    const error = asApiError(e);
    if (error.status >= 500) log?.(`${c.req.method} ${c.req.path} ${error.status}: ${error.message}`);
    return c.json(error.body, error.status);
  });
  app.notFound((c) =>
    c.json(
      new ApiError(
        404,
        `Unknown route ${c.req.method} ${c.req.path}: qk serves POST /v1/chat/completions, POST /v1/completions, GET /v1/models and GET /health.`,
        'invalid_request_error',
        null,
        'unknown_url',
      ).body,
      404,
    ),
  );

  app.use('*', originGuard(options.allowedOrigins ?? [], options.loopbackOnly ?? true));

  // The page holds no data and cannot send a key when a browser loads it: it asks for one, then calls the API with it.
  options.extraRoutes?.(app);

  if (options.apiKey !== undefined) {
    const key = options.apiKey;
    app.use('*', async (c, next) => {
      const header = c.req.header('authorization') ?? '';
      const given = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim();
      if (given === undefined)
        throw new ApiError(
          401,
          "You didn't provide an API key: send it as 'Authorization: Bearer KEY' (the key qk serve was started with).",
          'invalid_request_error',
          null,
          'missing_api_key',
        );
      if (!sameSecret(given, key))
        throw new ApiError(
          401,
          'Incorrect API key provided: use the key qk serve was started with (--api-key).',
          'invalid_request_error',
          null,
          'invalid_api_key',
        );
      await next();
    });
  }

  app.get('/health', (c) =>
    c.json({
      status: 'ok',
      model: modelId,
      engine: model.engine,
      max_context: model.maxContext,
      queued: active,
    }),
  );
  const modelCard = { id: modelId, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'qk' };
  app.get('/v1/models', (c) => c.json({ object: 'list', data: [modelCard] }));
  app.get('/v1/models/:id{.+}', (c) => {
    if (c.req.param('id') !== modelId) throw unknownModel(c.req.param('id'));
    return c.json(modelCard);
  });

  const limit = bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: () => {
      throw new ApiError(
        413,
        `The request body is larger than this server's limit of ${options.maxBodyBytes} bytes (qk serve --max-body-bytes).`,
        'invalid_request_error',
        null,
        'request_too_large',
      );
    },
  });

  function unknownModel(name: string): ApiError {
    return new ApiError(
      404,
      `The model '${name}' does not exist: this server serves '${modelId}' (GET /v1/models).`,
      'invalid_request_error',
      'model',
      'model_not_found',
    );
  }

  /** Checks what every request shares and starts its generation (it waits its turn in the model's queue). */
  function start(
    request: SamplingRequest,
    promptIds: readonly number[],
    thinking: Job['thinking'],
    signal: AbortSignal,
  ): Job {
    if (request.model !== modelId) throw unknownModel(request.model);
    const limitTokens = Math.min(options.maxPromptTokens, model.maxContext - 1);
    if (promptIds.length > limitTokens)
      throw new ApiError(
        400,
        `This model's maximum prompt length is ${limitTokens} tokens; your prompt has ${promptIds.length}. Shorten the messages or the prompt.`,
        'invalid_request_error',
        'messages',
        'context_length_exceeded',
      );
    if (active >= options.maxQueue)
      throw new ApiError(
        429,
        `The server is busy: ${active} requests are already running or waiting (qk serve --max-queue ${options.maxQueue}); retry shortly.`,
        'rate_limit_error',
        null,
        'queue_full',
      );
    const abort = new AbortController();
    // The client leaving (the request's signal fires when its connection closes before the response is done).
    const onGone = () => abort.abort(new Error('the client disconnected'));
    if (signal.aborted) onGone();
    else signal.addEventListener('abort', onGone, { once: true });
    let generation: Generation;
    try {
      generation = model.generate(promptIds, {
        ...options.defaults,
        ...request.options,
        maxTokens: request.maxTokens ?? options.defaults.maxTokens,
        signal: abort.signal,
      });
    } catch (e) {
      signal.removeEventListener('abort', onGone);
      throw e;
    }
    active++;
    const done = () => {
      active--;
      signal.removeEventListener('abort', onGone);
    };
    generation.result.then(done, done);
    return {
      id: randomUUID().replaceAll('-', ''),
      created: Math.floor(Date.now() / 1000),
      generation,
      thinking,
      abort,
    };
  }

  async function readBody(text: () => Promise<string>) {
    return parseJsonBody(await text());
  }

  app.post('/v1/chat/completions', limit, async (c) => {
    const request: ChatRequest = parseChatRequest(await readBody(() => c.req.text()), options.maxTokensLimit);
    const enableThinking = request.enableThinking ?? options.defaults.enableThinking;
    let promptIds: number[];
    try {
      promptIds = chatPromptIds(model, request.messages, enableThinking);
    } catch (e) {
      if (e instanceof QkError) throw invalidParam('messages', e.message);
      throw e;
    }
    // A template whose generation prompt already opens the block (Qwen3-2507 thinking) starts inside it.
    const opens = enableThinking && model.tokenizer.decode(promptIds.slice(-4)).trimEnd().endsWith('<think>');
    const job = start(
      request,
      promptIds,
      enableThinking ? (opens ? 'open' : 'maybe') : 'off',
      c.req.raw.signal,
    );
    const route = 'POST /v1/chat/completions';
    if (request.stream) return streamResponse(job, request, 'chat', route);
    const splitter = new ThinkingSplitter(job.thinking);
    const result = await settle(job, route);
    const parts = joinSplit(splitter.push(result.text), splitter.end());
    return c.json({
      id: `chatcmpl-${job.id}`,
      object: 'chat.completion',
      created: job.created,
      model: modelId,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: parts.content,
            ...(job.thinking === 'off' ? {} : { reasoning_content: parts.reasoning }),
          },
          logprobs: null,
          finish_reason: FINISH[result.stats.finishReason],
        },
      ],
      usage: usageOf(result.stats, result.stats.generatedTokens),
    });
  });

  app.post('/v1/completions', limit, async (c) => {
    const request: CompletionRequest = parseCompletionRequest(
      await readBody(() => c.req.text()),
      options.maxTokensLimit,
    );
    const { prompt } = request;
    if (Array.isArray(prompt)) {
      const bad = prompt.findIndex((id) => id >= model.config.vocabSize);
      if (bad >= 0)
        throw invalidParam(
          'prompt',
          `'prompt[${bad}]' is ${prompt[bad]}, outside the vocabulary of ${model.config.vocabSize} tokens.`,
        );
    }
    const promptIds = typeof prompt === 'string' ? model.tokenizer.encode(prompt) : prompt;
    const job = start(request, promptIds, 'off', c.req.raw.signal);
    const route = 'POST /v1/completions';
    if (request.stream) return streamResponse(job, request, 'completion', route);
    const result = await settle(job, route);
    return c.json({
      id: `cmpl-${job.id}`,
      object: 'text_completion',
      created: job.created,
      model: modelId,
      choices: [
        { index: 0, text: result.text, logprobs: null, finish_reason: FINISH[result.stats.finishReason] },
      ],
      usage: usageOf(result.stats, result.stats.generatedTokens),
    });
  });

  /** Awaits a whole generation for a non-streaming response. */
  async function settle(job: Job, route: string) {
    try {
      const result = await job.generation.result;
      log?.(logLine(route, 200, result.stats));
      return result;
    } catch (e) {
      if (e instanceof QkAbortError) {
        log?.(logLine(route, 499, undefined, ' · client disconnected, generation cancelled'));
        // Nobody is left to read it; the adapter drops the response.
        throw new ApiError(400, 'The request was cancelled.', 'invalid_request_error', null, 'cancelled');
      }
      throw asApiError(e);
    }
  }

  /** The SSE response of a streaming request: one `data:` event per chunk, then `[DONE]`. */
  function streamResponse(
    job: Job,
    request: SamplingRequest,
    kind: 'chat' | 'completion',
    route: string,
  ): Response {
    const encoder = new TextEncoder();
    const id = kind === 'chat' ? `chatcmpl-${job.id}` : `cmpl-${job.id}`;
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const envelope = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
      id,
      object,
      created: job.created,
      model: modelId,
      choices,
      ...(request.includeUsage ? { usage: null } : {}),
      ...extra,
    });
    const choice = (delta: SplitText | undefined, finish: string | null, text = '') =>
      kind === 'chat'
        ? {
            index: 0,
            delta:
              delta === undefined
                ? {}
                : {
                    ...(delta.content.length > 0 || job.thinking === 'off' ? { content: delta.content } : {}),
                    ...(delta.reasoning.length > 0 ? { reasoning_content: delta.reasoning } : {}),
                  },
            logprobs: null,
            finish_reason: finish,
          }
        : { index: 0, text, logprobs: null, finish_reason: finish };
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        const send = (event: unknown) => {
          const data = typeof event === 'string' ? event : JSON.stringify(event);
          if (!job.abort.signal.aborted) controller.enqueue(encoder.encode(`data: ${data}\n\n`));
        };
        const splitter = new ThinkingSplitter(job.thinking);
        const sendText = (piece: SplitText) => {
          if (piece.content.length === 0 && piece.reasoning.length === 0) return;
          send(envelope([choice(piece, null, piece.content)]));
        };
        if (kind === 'chat')
          send(
            envelope([
              { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
            ]),
          );
        try {
          for await (const chunk of job.generation) sendText(splitter.push(chunk));
          sendText(splitter.end());
          const { stats } = await job.generation.result;
          const usage = usageOf(stats, stats.generatedTokens);
          const last = envelope([choice(undefined, FINISH[stats.finishReason])]);
          // Usage rides on the final chunk always; OpenAI's own extra chunk follows when asked for.
          send({ ...last, usage: request.includeUsage ? null : usage });
          if (request.includeUsage) send(envelope([], { usage }));
          send('[DONE]');
          log?.(logLine(route, 200, stats, ' · streamed'));
        } catch (e) {
          if (e instanceof QkAbortError)
            log?.(logLine(route, 499, undefined, ' · client disconnected, generation cancelled'));
          else {
            const error = asApiError(e);
            log?.(logLine(route, error.status, undefined, `: ${error.message}`));
            send(error.body);
          }
        }
        try {
          controller.close();
        } catch {
          // Already cancelled by the client.
        }
      },
      cancel() {
        job.abort.abort(new Error('the client disconnected'));
      },
    });
    return new Response(body, {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
      },
    });
  }

  return app;
}

function joinSplit(a: SplitText, b: SplitText): SplitText {
  return { reasoning: a.reasoning + b.reasoning, content: a.content + b.content };
}
