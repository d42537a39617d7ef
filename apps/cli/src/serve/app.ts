/**
 * The OpenAI-compatible HTTP API over one loaded model: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `GET /v1/models`, `GET /health`. Requests take turns on the model in arrival order (its own FIFO queue); a client
 * that goes away aborts its generation, queued or running.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { QkError } from '@qk/ops';
import {
  type ChatMessage,
  type ChatTemplateOptions,
  type GenerateOptions,
  type Generation,
  parseToolCalls,
  promptOpensThinking,
  QkAbortError,
  type Qwen3Model,
  type SplitText,
  ThinkingSplitter,
} from '@qk/qwen3';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ApiError, invalidParam } from './errors.js';
import { chatLogprobsOf, completionLogprobsOf, openAiToolCalls } from './extras.js';
import { originGuard } from './origin.js';
import { asApiError, FINISH, type Job, logLine, usageOf } from './outcome.js';
import {
  type ChatRequest,
  type CompletionRequest,
  parseChatRequest,
  parseCompletionRequest,
  parseJsonBody,
  type SamplingRequest,
} from './request.js';
import { streamResponse } from './stream.js';

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

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  // Compare in constant time; lengths differing says nothing an attacker could not count anyway.
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether the tokenizer can keep message text from turning into control tokens (the Hugging Face one can). */
interface ChatEncoder {
  encodeChat(messages: readonly ChatMessage[], options: ChatTemplateOptions): number[];
}

/** A chat request's prompt ids as the server renders them (`qk bench serve` holds usage counts to them). */
export function chatPromptIds(
  model: Qwen3Model,
  messages: readonly ChatMessage[],
  enableThinking: boolean,
  tools: ChatRequest['tools'],
): number[] {
  const tokenizer = model.tokenizer as Qwen3Model['tokenizer'] & Partial<ChatEncoder>;
  const shown = tools !== undefined && tools.toolChoice !== 'none' ? { tools: tools.tools } : {};
  const options = { addGenerationPrompt: true, enableThinking, ...shown };
  return typeof tokenizer.encodeChat === 'function'
    ? tokenizer.encodeChat(messages, options)
    : tokenizer.encode(tokenizer.applyChatTemplate(messages, options));
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
    launch: (options: GenerateOptions) => Generation,
    tools?: ChatRequest['tools'],
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
      generation = launch({
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
      ...(tools === undefined || tools.toolChoice === 'none' ? {} : { tools }),
    };
  }

  async function readBody(text: () => Promise<string>) {
    return parseJsonBody(await text());
  }

  app.post('/v1/chat/completions', limit, async (c) => {
    const request: ChatRequest = parseChatRequest(
      await readBody(() => c.req.text()),
      options.maxTokensLimit,
      model.config.vocabSize,
    );
    const enableThinking = request.enableThinking ?? options.defaults.enableThinking;
    let promptIds: number[];
    try {
      promptIds = chatPromptIds(model, request.messages, enableThinking, request.tools);
    } catch (e) {
      if (e instanceof QkError) throw invalidParam('messages', e.message);
      throw e;
    }
    // A template whose generation prompt already opens the block (Qwen3-2507 thinking) starts inside it.
    const opens = enableThinking && promptOpensThinking((ids) => model.tokenizer.decode(ids), promptIds);
    const job = start(
      request,
      promptIds,
      enableThinking ? (opens ? 'open' : 'maybe') : 'off',
      c.req.raw.signal,
      (generateOptions) =>
        model.chat(request.messages, {
          ...generateOptions,
          enableThinking,
          ...(request.tools ?? {}),
          ...(request.schema === undefined ? {} : { schema: request.schema }),
        }),
      request.tools,
    );
    const route = 'POST /v1/chat/completions';
    if (request.stream) return streamResponse({ model, modelId, log }, job, request, 'chat', route);
    const splitter = new ThinkingSplitter(job.thinking);
    const result = await settle(job, route);
    const parts = joinSplit(splitter.push(result.text), splitter.end());
    const calls = job.tools === undefined ? undefined : parseToolCalls(parts.content, job.tools.tools);
    const content = calls === undefined ? parts.content : calls.content;
    const toolCalls = calls === undefined || calls.toolCalls.length === 0 ? undefined : calls.toolCalls;
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
            content: toolCalls !== undefined && content.length === 0 ? null : content,
            ...(job.thinking === 'off' ? {} : { reasoning_content: parts.reasoning }),
            ...(toolCalls === undefined ? {} : { tool_calls: openAiToolCalls(toolCalls) }),
          },
          logprobs:
            result.logprobs === undefined
              ? null
              : chatLogprobsOf(result.logprobs, (ids) => model.tokenizer.decode(ids)),
          // A reply the token limit cut says so, calls or not.
          finish_reason:
            toolCalls !== undefined && result.stats.finishReason === 'stop'
              ? 'tool_calls'
              : FINISH[result.stats.finishReason],
        },
      ],
      usage: usageOf(result.stats, result.stats.generatedTokens),
    });
  });

  app.post('/v1/completions', limit, async (c) => {
    const request: CompletionRequest = parseCompletionRequest(
      await readBody(() => c.req.text()),
      options.maxTokensLimit,
      model.config.vocabSize,
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
    const schema = request.schema === undefined ? {} : { schema: request.schema };
    const job = start(request, promptIds, 'off', c.req.raw.signal, (generateOptions) =>
      model.generate(promptIds, { ...generateOptions, ...schema }),
    );
    const route = 'POST /v1/completions';
    if (request.stream) return streamResponse({ model, modelId, log }, job, request, 'completion', route);
    const result = await settle(job, route);
    return c.json({
      id: `cmpl-${job.id}`,
      object: 'text_completion',
      created: job.created,
      model: modelId,
      choices: [
        {
          index: 0,
          text: result.text,
          logprobs:
            result.logprobs === undefined ? null : completionLogprobsOf(result.logprobs, model.tokenizer),
          finish_reason: FINISH[result.stats.finishReason],
        },
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

  return app;
}

function joinSplit(a: SplitText, b: SplitText): SplitText {
  return { reasoning: a.reasoning + b.reasoning, content: a.content + b.content };
}
