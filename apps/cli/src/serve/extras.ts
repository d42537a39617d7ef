/**
 * The OpenAI request fields beyond plain sampling: `response_format`, `tools` / `tool_choice`, assistant
 * `tool_calls` and `tool` messages in the history, the sampling controls (`presence_penalty`, `frequency_penalty`,
 * `logit_bias`, `logprobs`, `top_logprobs`, and `min_p`, `repetition_penalty` as extensions), and the response
 * side: `logprobs` and streamed `tool_calls` deltas. Each mistake is a 400 naming the field.
 */
import { QkValueError } from '@qk/ops';
import {
  checkTools,
  type GenerateOptions,
  type JsonSchema,
  parseToolCalls,
  type Qwen3Tokenizer,
  type SampledToken,
  type TextStream,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
} from '@qk/qwen3';
import { invalidParam } from './errors.js';

type Body = Record<string, unknown>;

const isObject = (x: unknown): x is Body => typeof x === 'object' && x !== null && !Array.isArray(x);

function numberIn(body: Body, name: string, lo: number, hi: number, integer = false): number | undefined {
  const x = body[name];
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'number' || !Number.isFinite(x) || x < lo || x > hi || (integer && !Number.isInteger(x)))
    throw invalidParam(
      name,
      `'${name}' must be ${integer ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(x)}.`,
    );
  return x;
}

/**
 * `presence_penalty`, `frequency_penalty`, `logit_bias`, `min_p`, `repetition_penalty` as generation options.
 * `vocabSize` bounds `logit_bias` keys.
 */
export function samplingControls(body: Body, vocabSize: number): GenerateOptions {
  const presencePenalty = numberIn(body, 'presence_penalty', -2, 2);
  const frequencyPenalty = numberIn(body, 'frequency_penalty', -2, 2);
  const minP = numberIn(body, 'min_p', 0, 1);
  const repetition = body.repetition_penalty;
  if (
    repetition !== undefined &&
    repetition !== null &&
    !(typeof repetition === 'number' && repetition > 0 && Number.isFinite(repetition))
  )
    throw invalidParam(
      'repetition_penalty',
      `'repetition_penalty' must be a number > 0 (1 is off), got ${JSON.stringify(repetition)}.`,
    );
  let logitBias: Record<string, number> | undefined;
  if (body.logit_bias !== undefined && body.logit_bias !== null) {
    if (!isObject(body.logit_bias))
      throw invalidParam('logit_bias', "'logit_bias' must be an object of token id → bias.");
    logitBias = {};
    for (const [key, value] of Object.entries(body.logit_bias)) {
      if (!/^\d+$/.test(key) || Number(key) >= vocabSize)
        throw invalidParam(
          'logit_bias',
          `'logit_bias' has key ${JSON.stringify(key)}; keys must be token ids in [0, ${vocabSize}).`,
        );
      if (typeof value !== 'number' || !Number.isFinite(value) || value < -100 || value > 100)
        throw invalidParam(
          'logit_bias',
          `'logit_bias' maps ${key} to ${JSON.stringify(value)}; biases must lie in [-100, 100].`,
        );
      logitBias[key] = value;
    }
  }
  const options: Record<string, unknown> = {
    presencePenalty,
    frequencyPenalty,
    minP,
    repetitionPenalty: repetition ?? undefined,
    logitBias,
  };
  return Object.fromEntries(
    Object.entries(options).filter(([, v]) => v !== undefined && v !== null),
  ) as GenerateOptions;
}

/** Chat's `logprobs` (boolean) and `top_logprobs` (0–20, needs `logprobs`). */
export function chatLogprobs(body: Body): GenerateOptions {
  const logprobs = body.logprobs;
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== 'boolean')
    throw invalidParam('logprobs', "'logprobs' must be true or false.");
  const top = numberIn(body, 'top_logprobs', 0, 20, true);
  if (top !== undefined && logprobs !== true)
    throw invalidParam('top_logprobs', "'top_logprobs' needs 'logprobs': true.");
  if (logprobs !== true) return {};
  return { logprobs: true, ...(top === undefined ? {} : { topLogprobs: top }) };
}

/** The legacy completions `logprobs`: an integer 0–5, the alternatives per token. */
export function completionLogprobs(body: Body): GenerateOptions {
  const top = numberIn(body, 'logprobs', 0, 5, true);
  return top === undefined ? {} : { logprobs: true, topLogprobs: top };
}

/** `response_format`: `text`, `json_object` (any JSON object) or `json_schema` (`{ name, schema, strict? }`). */
export function responseFormat(body: Body): JsonSchema | undefined {
  const format = body.response_format;
  if (format === undefined || format === null) return undefined;
  if (!isObject(format) || typeof format.type !== 'string')
    throw invalidParam(
      'response_format',
      '\'response_format\' must be { "type": "text" | "json_object" | "json_schema", … }.',
    );
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'object' };
  if (format.type === 'json_schema') {
    const spec = format.json_schema;
    if (!isObject(spec) || typeof spec.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name))
      throw invalidParam(
        'response_format.json_schema',
        '\'response_format.json_schema\' must be { "name": "…" (letters, digits, _ or -), "schema": { … } }.',
      );
    if (spec.schema === undefined) return true;
    if (!isObject(spec.schema) && typeof spec.schema !== 'boolean')
      throw invalidParam(
        'response_format.json_schema.schema',
        "'response_format.json_schema.schema' must be a JSON Schema object.",
      );
    return spec.schema as JsonSchema;
  }
  throw invalidParam(
    'response_format',
    `'response_format.type' must be text, json_object or json_schema, got ${JSON.stringify(format.type)}.`,
  );
}

/** `tools`, `tool_choice` and `parallel_tool_calls`, checked by the library's rules with the field named. */
export function toolsOf(
  body: Body,
): { tools: ToolDefinition[]; toolChoice: ToolChoice; parallelToolCalls?: boolean } | undefined {
  const parallel = body.parallel_tool_calls;
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    throw invalidParam('parallel_tool_calls', "'parallel_tool_calls' must be true or false.");
  const parallelToolCalls = typeof parallel === 'boolean' ? { parallelToolCalls: parallel } : {};
  if (body.tools === undefined || body.tools === null) {
    if (
      body.tool_choice !== undefined &&
      body.tool_choice !== null &&
      body.tool_choice !== 'none' &&
      body.tool_choice !== 'auto'
    )
      throw invalidParam('tool_choice', "'tool_choice' needs 'tools'.");
    return undefined;
  }
  let tools: ToolDefinition[];
  try {
    tools = checkTools('tools', body.tools);
  } catch (e) {
    if (e instanceof QkValueError) throw invalidParam('tools', e.message);
    throw e;
  }
  const choice = body.tool_choice ?? 'auto';
  if (choice === 'auto' || choice === 'none' || choice === 'required')
    return { tools, toolChoice: choice, ...parallelToolCalls };
  const name = isObject(choice) && isObject(choice.function) ? choice.function.name : undefined;
  if (
    !isObject(choice) ||
    choice.type !== 'function' ||
    typeof name !== 'string' ||
    !tools.some((t) => t.function.name === name)
  )
    throw invalidParam(
      'tool_choice',
      `'tool_choice' must be "auto", "none", "required" or { "type": "function", "function": { "name": one of ${tools.map((t) => t.function.name).join(', ')} } }.`,
    );
  return { tools, toolChoice: { type: 'function', function: { name } }, ...parallelToolCalls };
}

/** An assistant message's `tool_calls` (OpenAI's shape, arguments as JSON text) as library tool calls. */
export function historyToolCalls(value: unknown, index: number): ToolCall[] | undefined {
  if (value === undefined || value === null) return undefined;
  const param = `messages[${index}].tool_calls`;
  if (!Array.isArray(value)) throw invalidParam(param, `'${param}' must be an array of tool calls.`);
  return value.map((call, i) => {
    const fn = isObject(call) ? call.function : undefined;
    let args: unknown;
    try {
      args = isObject(fn) && typeof fn.arguments === 'string' ? JSON.parse(fn.arguments) : undefined;
    } catch {
      args = undefined;
    }
    if (!isObject(call) || !isObject(fn) || typeof fn.name !== 'string' || !isObject(args))
      throw invalidParam(
        `${param}[${i}]`,
        `'${param}[${i}]' must be { "id", "type": "function", "function": { "name", "arguments": "<JSON object>" } }.`,
      );
    return { id: typeof call.id === 'string' ? call.id : `call_${i}`, name: fn.name, arguments: args };
  });
}

/** Library tool calls in OpenAI's response shape (`index` for stream deltas). */
export function openAiToolCalls(calls: readonly ToolCall[], first = 0) {
  return calls.map((call, i) => ({
    index: first + i,
    id: call.id,
    type: 'function' as const,
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
}

/** Per-token log-probabilities in chat's shape (`{ content: [{ token, logprob, bytes, top_logprobs }] }`). */
export function chatLogprobsOf(tokens: readonly SampledToken[], decode: (ids: number[]) => string) {
  const entry = (id: number, logprob: number) => {
    const token = decode([id]);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  };
  return {
    content: tokens.map((t) => ({
      ...entry(t.id, t.logprob ?? 0),
      top_logprobs: (t.topLogprobs ?? []).map((alt) => entry(alt.id, alt.logprob)),
    })),
  };
}

/**
 * The text each token adds, from the tokenizer's own stream (`createStream`), so that the pieces join to the
 * decoded text: a character whose UTF-8 bytes span several tokens belongs to the token that completes it (the ones
 * before add `''`), as a stream of deltas shows it.
 */
export function tokenTexts(ids: readonly number[], stream: TextStream): string[] {
  const texts = ids.map((id) => stream.push(id));
  if (texts.length > 0) texts[texts.length - 1] += stream.flush();
  return texts;
}

/** Per-token log-probabilities in the legacy completions shape; `tokens` join to the completion's text. */
export function completionLogprobsOf(
  tokens: readonly SampledToken[],
  tokenizer: Pick<Qwen3Tokenizer, 'decode' | 'createStream'>,
) {
  const texts = tokenTexts(
    tokens.map((t) => t.id),
    tokenizer.createStream(),
  );
  let offset = 0;
  return {
    tokens: texts,
    token_logprobs: tokens.map((t) => t.logprob ?? 0),
    top_logprobs: tokens.map((t) =>
      Object.fromEntries((t.topLogprobs ?? []).map((alt) => [tokenizer.decode([alt.id]), alt.logprob])),
    ),
    text_offset: texts.map((text) => {
      const at = offset;
      offset += text.length;
      return at;
    }),
  };
}

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';

/**
 * Splits a streamed answer into text and tool calls: text passes through (holding back only what may be the start
 * of `<tool_call>`), a call is held until its `</tool_call>` and then comes out whole, parsed and validated. A block
 * that does not parse as a call of one of the tools comes out as text.
 */
export class ToolCallStream {
  readonly #tools: readonly ToolDefinition[];
  #held = '';
  #inCall = false;
  /** Calls emitted so far (their `index` in the stream). */
  count = 0;

  constructor(tools: readonly ToolDefinition[]) {
    this.#tools = tools;
  }

  push(text: string): { content: string; calls: ToolCall[] } {
    let content = '';
    const calls: ToolCall[] = [];
    let rest = this.#held + text;
    this.#held = '';
    for (;;) {
      if (!this.#inCall) {
        const open = rest.indexOf(OPEN);
        if (open < 0) {
          let keep = rest.length;
          for (let k = Math.min(rest.length, OPEN.length - 1); k > 0; k--)
            if (OPEN.startsWith(rest.slice(-k))) {
              keep = rest.length - k;
              break;
            }
          content += rest.slice(0, keep);
          this.#held = rest.slice(keep);
          break;
        }
        content += rest.slice(0, open);
        rest = rest.slice(open);
        this.#inCall = true;
      }
      const close = rest.indexOf(CLOSE);
      if (close < 0) {
        this.#held = rest;
        break;
      }
      const block = rest.slice(0, close + CLOSE.length);
      const parsed = parseToolCalls(block, this.#tools);
      calls.push(...parsed.toolCalls);
      if (parsed.toolCalls.length === 0) content += block;
      rest = rest.slice(close + CLOSE.length);
      this.#inCall = false;
    }
    this.count += calls.length;
    return { content, calls };
  }

  /** The end of the reply: an unfinished call (cut by the token limit) comes out as text. */
  end(): string {
    const held = this.#held;
    this.#held = '';
    return held;
  }
}
