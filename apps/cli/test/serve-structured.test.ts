/**
 * `qk serve`'s structured output, tools and sampling controls through the official `openai` client, on the tiny
 * preset (cpu engine, random weights: free text is noise, so every valid JSON or tool call is the constraint's
 * doing): `response_format`, `tools` / `tool_choice` / `tool_calls` (streamed deltas included), a multi-turn tool
 * conversation, `logprobs` / `top_logprobs`, and OpenAI's error shape for bad values.
 */
import type { Qwen3Model } from '@qk/qwen3';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/serve/server.js';
import { loadTiny, MODEL_ID, postJson, serveTiny } from './serve-support.js';

let model: Qwen3Model;
let server: RunningServer;
let client: OpenAI;
const ajv = new Ajv({ strict: false });

beforeAll(async () => {
  model = await loadTiny();
  ({ server } = await serveTiny(model, {
    defaults: { maxTokens: 200, temperature: 1, enableThinking: false },
  }));
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
}, 60_000);

afterAll(async () => {
  await server?.close();
  model?.dispose();
});

const word = () => Math.random().toString(36).slice(2, 8).replace(/[0-9]/g, 'x');

/** A schema with a nested object, an array, an enum and bounded numbers, its names drawn at random. */
function formSchema() {
  const [a, b, c] = [word(), word(), word()];
  return {
    type: 'object',
    properties: {
      [a]: { type: 'string', maxLength: 10 },
      [b]: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 },
      [c]: {
        type: 'object',
        properties: { n: { type: 'integer', minimum: -50, maximum: 50 }, ok: { type: 'boolean' } },
        required: ['n', 'ok'],
        additionalProperties: false,
      },
    },
    required: [a, b, c],
    additionalProperties: false,
  };
}

const weather = (name: string): ChatCompletionFunctionTool => ({
  type: 'function',
  function: {
    name,
    description: 'Weather forecast',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 12 },
        days: { type: 'integer', minimum: 1, maximum: 5 },
      },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
});

describe('response_format', () => {
  it('json_schema: the reply validates, streamed and not, over several seeds', async () => {
    for (const seed of [1, 2]) {
      const schema = formSchema();
      const messages = [{ role: 'user' as const, content: 'Fill the form.' }];
      const response_format = { type: 'json_schema' as const, json_schema: { name: 'form', schema } };
      const whole = await client.chat.completions.create({
        model: MODEL_ID,
        messages,
        response_format,
        seed,
      });
      expect(whole.choices[0]!.finish_reason).toBe('stop');
      expect(ajv.validate(schema, JSON.parse(whole.choices[0]!.message.content!))).toBe(true);
      const stream = await client.chat.completions.create({
        model: MODEL_ID,
        messages,
        response_format,
        seed,
        stream: true,
      });
      let content = '';
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
      expect(content).toBe(whole.choices[0]!.message.content);
    }
  }, 240_000);

  it('json_object: the reply is a JSON object', async () => {
    const whole = await client.chat.completions.create({
      model: MODEL_ID,
      messages: [{ role: 'user', content: 'JSON please' }],
      response_format: { type: 'json_object' },
      max_tokens: 300,
      seed: 5,
    });
    const { finish_reason, message } = whole.choices[0]!;
    // An unbounded object can meet the token limit; a finished one parses.
    if (finish_reason === 'stop') expect(JSON.parse(message.content!)).toBeTypeOf('object');
    else expect(finish_reason).toBe('length');
  }, 120_000);
});

describe('/v1/completions', () => {
  it('response_format and the legacy logprobs (alternatives per token)', async () => {
    const schema = formSchema();
    const top = 1 + Math.floor(Math.random() * 5);
    const response = await postJson(`${server.url}/v1/completions`, {
      model: MODEL_ID,
      prompt: 'JSON: ',
      response_format: { type: 'json_schema', json_schema: { name: 'form', schema } },
      logprobs: top,
      seed: 9,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      choices: { text: string; logprobs: { tokens: string[]; top_logprobs: Record<string, number>[] } }[];
    };
    const { text, logprobs } = body.choices[0]!;
    expect(ajv.validate(schema, JSON.parse(text))).toBe(true);
    expect(logprobs.tokens.join('')).toBe(text);
    for (const alternatives of logprobs.top_logprobs)
      expect(Object.keys(alternatives).length).toBeLessThanOrEqual(top);
  }, 120_000);
});

describe('tools', () => {
  it('a multi-turn tool conversation: calls in OpenAI shape (streamed deltas too), results back, an answer', async () => {
    const tools = [weather(`get_${word()}`), weather(`find_${word()}`)];
    const messages: ChatCompletionMessageParam[] = [
      { role: 'user', content: [{ type: 'text', text: `Weather in ${word()}?` }] },
    ];
    // One call per reply: with parallel calls, a random model at temperature 1 sometimes chained calls past the
    // server's token limit (and the next turn's prompt past its prompt limit).
    const first = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      tools,
      tool_choice: 'required',
      seed: 3,
      parallel_tool_calls: false,
    });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const calls = choice.message.tool_calls!;
    expect(calls).toHaveLength(1);
    for (const call of calls) {
      expect(call.type).toBe('function');
      const fn = (call as { function: { name: string; arguments: string } }).function;
      const tool = tools.find((t) => t.function.name === fn.name)!;
      expect(ajv.validate(tool.function.parameters!, JSON.parse(fn.arguments))).toBe(true);
    }
    // The same request streamed: the deltas assemble into the same calls.
    const stream = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      tools,
      tool_choice: 'required',
      seed: 3,
      parallel_tool_calls: false,
      stream: true,
    });
    const assembled: { name: string; arguments: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
        assembled[delta.index] ??= { name: '', arguments: '' };
        assembled[delta.index]!.name += delta.function?.name ?? '';
        assembled[delta.index]!.arguments += delta.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(assembled).toEqual(
      calls.map((c) => {
        const fn = (c as { function: { name: string; arguments: string } }).function;
        return { name: fn.name, arguments: fn.arguments };
      }),
    );
    messages.push(choice.message as ChatCompletionMessageParam);
    for (const call of calls) messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' });
    const named = tools[1]!.function.name;
    const second = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: named } },
      seed: 4,
    });
    const secondCalls = second.choices[0]!.message.tool_calls!;
    expect(secondCalls.map((c) => (c as { function: { name: string } }).function.name)).toEqual([named]);
    messages.push(second.choices[0]!.message as ChatCompletionMessageParam);
    messages.push({ role: 'tool', tool_call_id: secondCalls[0]!.id, content: '{"ok": true}' });
    const final = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      tools,
      tool_choice: 'none',
      max_tokens: 6,
    });
    expect(final.choices[0]!.message.tool_calls).toBeUndefined();
    expect(final.choices[0]!.message.content!.length).toBeGreaterThan(0);
  }, 300_000);
});

describe('sampling controls and logprobs', () => {
  it('logprobs and top_logprobs: one entry per token, alternatives sorted, log-probabilities ≤ 0', async () => {
    const top = 1 + Math.floor(Math.random() * 5);
    const whole = await client.chat.completions.create({
      model: MODEL_ID,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: top,
      presence_penalty: 0.5,
      frequency_penalty: 0.2,
      logit_bias: { '100': -100 },
    });
    const content = whole.choices[0]!.logprobs!.content!;
    expect(content.length).toBe(
      whole.usage!.completion_tokens - (whole.choices[0]!.finish_reason === 'stop' ? 1 : 0),
    );
    for (const entry of content) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(top);
      const values = entry.top_logprobs.map((t) => t.logprob);
      expect([...values].sort((a, b) => b - a)).toEqual(values);
      expect(Buffer.from(entry.bytes!).toString('utf8')).toBe(entry.token);
    }
  }, 120_000);

  it('bad values are 400s in OpenAI’s shape, naming the field', async () => {
    const base = { model: MODEL_ID, messages: [{ role: 'user', content: 'x' }] };
    const cases: [Record<string, unknown>, string][] = [
      [{ response_format: { type: 'yaml' } }, 'response_format'],
      [
        {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'f', schema: { type: 'string', format: 'email' } },
          },
        },
        'response_format',
      ],
      [{ tools: [weather('a')], tool_choice: { type: 'function', function: { name: 'b' } } }, 'tool_choice'],
      [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools'],
      [{ tools: [weather('a')], response_format: { type: 'json_object' } }, 'response_format'],
      [{ presence_penalty: 2.5 }, 'presence_penalty'],
      [{ frequency_penalty: 'x' }, 'frequency_penalty'],
      [{ logit_bias: { [String(model.config.vocabSize)]: 1 } }, 'logit_bias'],
      [{ logit_bias: { '5': 101 } }, 'logit_bias'],
      [{ top_logprobs: 3 }, 'top_logprobs'],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
      [{ min_p: 1.5 }, 'min_p'],
      [{ repetition_penalty: 0 }, 'repetition_penalty'],
    ];
    for (const [extra, param] of cases) {
      const response = await postJson(`${server.url}/v1/chat/completions`, { ...base, ...extra });
      expect(response.status, JSON.stringify(extra)).toBe(400);
      const body = (await response.json()) as { error: { message: string; type: string; param: string } };
      expect(body.error.type).toBe('invalid_request_error');
      expect(body.error.param, JSON.stringify(extra)).toBe(param);
      expect(body.error.message.length).toBeGreaterThan(20);
    }
  });
});
