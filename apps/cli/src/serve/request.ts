/**
 * Reads an OpenAI request body into qk's options: every field checked, each mistake a 400 that names the field,
 * so a client sees what to fix instead of a generation with a silently ignored setting.
 */
import type { ChatMessage, GenerateOptions, JsonSchema, ToolChoice, ToolDefinition } from '@qk/qwen3';
import { ApiError, invalidParam } from './errors.js';
import {
  chatLogprobs,
  completionLogprobs,
  historyToolCalls,
  responseFormat,
  samplingControls,
  toolsOf,
} from './extras.js';

/** What both endpoints take. */
export interface SamplingRequest {
  readonly model: string;
  readonly stream: boolean;
  /** `stream_options.include_usage`: one last chunk with the usage before `[DONE]`. */
  readonly includeUsage: boolean;
  /** `max_completion_tokens` or `max_tokens`; absent: the server's default. */
  readonly maxTokens: number | undefined;
  /** Generation options other than `maxTokens` and `signal`, only those the request set. */
  readonly options: GenerateOptions;
}

export interface ChatRequest extends SamplingRequest {
  readonly messages: ChatMessage[];
  /** `enable_thinking` or `chat_template_kwargs.enable_thinking`; absent: the server's default. */
  readonly enableThinking: boolean | undefined;
  /** `tools` and `tool_choice`; absent: no tools. */
  readonly tools:
    | {
        readonly tools: ToolDefinition[];
        readonly toolChoice: ToolChoice;
        readonly parallelToolCalls?: boolean;
      }
    | undefined;
  /** `response_format`'s schema (`json_object`: any object); absent: free text. */
  readonly schema: JsonSchema | undefined;
}

export interface CompletionRequest extends SamplingRequest {
  /** Text, or token ids. */
  readonly prompt: string | number[];
  /** `response_format`'s schema (an extension here, as in vLLM); absent: free text. */
  readonly schema: JsonSchema | undefined;
}

type Body = Record<string, unknown>;

const isObject = (x: unknown): x is Body => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Parses the request text as a JSON object, or says what is wrong with it. */
export function parseJsonBody(text: string): Body {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new ApiError(
      400,
      `We could not parse the JSON body of your request (${e instanceof Error ? e.message : String(e)}). The body must be a JSON object.`,
      'invalid_request_error',
      null,
      'invalid_json',
    );
  }
  if (!isObject(body))
    throw new ApiError(400, 'The request body must be a JSON object.', 'invalid_request_error');
  return body;
}

function optionalNumber(
  body: Body,
  name: string,
  valid: (x: number) => boolean,
  range: string,
): number | undefined {
  const x = body[name];
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'number' || !Number.isFinite(x) || !valid(x))
    throw invalidParam(name, `'${name}' must be a number ${range}, got ${JSON.stringify(x)}.`);
  return x;
}

function optionalBoolean(body: Body, name: string, shownName = name): boolean | undefined {
  const x = body[name];
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'boolean') throw invalidParam(shownName, `'${shownName}' must be true or false.`);
  return x;
}

function stopStrings(body: Body): string[] | undefined {
  const stop = body.stop;
  if (stop === undefined || stop === null) return undefined;
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || list.length > 4 || list.some((s) => typeof s !== 'string' || s.length === 0))
    throw invalidParam('stop', "'stop' must be a non-empty string or an array of at most 4 of them.");
  return list as string[];
}

function samplingRequest(body: Body, maxTokensLimit: number, vocabSize: number): SamplingRequest {
  if (typeof body.model !== 'string' || body.model.length === 0)
    throw invalidParam(
      'model',
      "'model' is required: the id GET /v1/models lists.",
      'missing_required_parameter',
    );
  const n = optionalNumber(body, 'n', Number.isInteger, 'that is an integer');
  if (n !== undefined && n !== 1)
    throw invalidParam('n', `'n' must be 1: qk generates one choice per request, got ${n}.`);
  const stream = optionalBoolean(body, 'stream') ?? false;
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && !isObject(streamOptions))
    throw invalidParam('stream_options', "'stream_options' must be an object.");
  const includeUsage =
    (isObject(streamOptions)
      ? optionalBoolean(streamOptions, 'include_usage', 'stream_options.include_usage')
      : undefined) ?? false;
  const tokenLimit = (name: string) =>
    optionalNumber(body, name, (x) => Number.isSafeInteger(x) && x >= 1, 'that is a positive integer');
  const maxTokens = tokenLimit('max_completion_tokens') ?? tokenLimit('max_tokens');
  if (maxTokens !== undefined && maxTokens > maxTokensLimit) {
    const name = body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
    throw invalidParam(
      name,
      `'${name}' is ${maxTokens}, above this server's limit of ${maxTokensLimit} tokens per reply.`,
    );
  }
  const temperature = optionalNumber(body, 'temperature', (x) => x >= 0 && x <= 2, 'in [0, 2]');
  const topP = optionalNumber(body, 'top_p', (x) => x >= 0 && x <= 1, 'in [0, 1]');
  const topK = optionalNumber(
    body,
    'top_k',
    (x) => Number.isSafeInteger(x) && x >= -1,
    'that is an integer >= -1 (-1 or 0 keep every token)',
  );
  const seed = optionalNumber(body, 'seed', Number.isSafeInteger, 'that is an integer');
  const stop = stopStrings(body);
  const options: Record<string, unknown> = {
    // top_p 0 keeps only the most likely token: greedy.
    temperature: topP === 0 ? 0 : temperature,
    topP: topP === 0 ? undefined : topP,
    topK: topK === undefined ? undefined : Math.max(0, topK),
    // Any integer is a seed to OpenAI; qk's are non-negative, so fold negatives onto them.
    seed: seed === undefined ? undefined : Math.abs(seed),
    stop,
    ...samplingControls(body, vocabSize),
  };
  return {
    model: body.model,
    stream,
    includeUsage: stream && includeUsage,
    maxTokens,
    options: Object.fromEntries(
      Object.entries(options).filter(([, v]) => v !== undefined),
    ) as GenerateOptions,
  };
}

const ROLES: Record<string, ChatMessage['role']> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
  tool: 'tool',
};

/** The body of `POST /v1/chat/completions`; `vocabSize` bounds `logit_bias` keys. */
export function parseChatRequest(
  body: Body,
  maxTokensLimit: number,
  vocabSize = Number.MAX_SAFE_INTEGER,
): ChatRequest {
  const base = samplingRequest(body, maxTokensLimit, vocabSize);
  const sampling = { ...base, options: { ...base.options, ...chatLogprobs(body) } };
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw invalidParam(
      'messages',
      "'messages' must be a non-empty array of { role, content } messages.",
      'missing_required_parameter',
    );
  const parsed = messages.map((m, i): ChatMessage => {
    if (!isObject(m))
      throw invalidParam(`messages[${i}]`, `'messages[${i}]' must be an object with a role and content.`);
    const role = typeof m.role === 'string' ? ROLES[m.role] : undefined;
    if (role === undefined)
      throw invalidParam(
        `messages[${i}].role`,
        `'messages[${i}].role' must be system, developer, user, assistant or tool.`,
      );
    const toolCalls = role === 'assistant' ? historyToolCalls(m.tool_calls, i) : undefined;
    const reasoning =
      typeof m.reasoning_content === 'string' && role === 'assistant' ? m.reasoning_content : undefined;
    return {
      role,
      // Strings, text parts or null: the library checks them and names the part at fault.
      content: (m.content ?? null) as ChatMessage['content'],
      ...(toolCalls === undefined ? {} : { toolCalls }),
      ...(reasoning === undefined ? {} : { reasoning }),
      ...(role === 'tool' && typeof m.tool_call_id === 'string' ? { toolCallId: m.tool_call_id } : {}),
    };
  });
  const kwargs = body.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null && !isObject(kwargs))
    throw invalidParam('chat_template_kwargs', "'chat_template_kwargs' must be an object.");
  const enableThinking =
    optionalBoolean(body, 'enable_thinking') ??
    (isObject(kwargs)
      ? optionalBoolean(kwargs, 'enable_thinking', 'chat_template_kwargs.enable_thinking')
      : undefined);
  const tools = toolsOf(body);
  const schema = responseFormat(body);
  if (schema !== undefined && tools !== undefined && tools.toolChoice !== 'none')
    throw invalidParam(
      'response_format',
      "'response_format' cannot be combined with 'tools' (the reply is either tool calls or the formatted text); set 'tool_choice' to \"none\" or drop one.",
    );
  return { ...sampling, messages: parsed, enableThinking, tools, schema };
}

/** The body of `POST /v1/completions`. */
export function parseCompletionRequest(
  body: Body,
  maxTokensLimit: number,
  vocabSize = Number.MAX_SAFE_INTEGER,
): CompletionRequest {
  const base = samplingRequest(body, maxTokensLimit, vocabSize);
  const sampling = { ...base, options: { ...base.options, ...completionLogprobs(body) } };
  for (const name of ['suffix', 'best_of'] as const) {
    const value = body[name];
    if (value !== undefined && value !== null && !(name === 'best_of' && value === 1))
      throw invalidParam(name, `'${name}' is not supported by qk.`, 'unsupported_parameter');
  }
  if (body.echo === true)
    throw invalidParam('echo', "'echo' is not supported by qk.", 'unsupported_parameter');
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  const ids =
    Array.isArray(prompt) && prompt.length > 0 && prompt.every((x) => Number.isSafeInteger(x) && x >= 0);
  if (!(typeof prompt === 'string' && prompt.length > 0) && !ids)
    throw invalidParam(
      'prompt',
      "'prompt' must be a non-empty string (or one string in an array, or an array of token ids).",
    );
  return { ...sampling, prompt: prompt as string | number[], schema: responseFormat(body) };
}
