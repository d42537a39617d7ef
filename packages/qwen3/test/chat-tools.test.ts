/**
 * Structured output, tool calling, message content parts and reasoning through `Qwen3Model` end to end: the tiny
 * preset on the cpu engine with the real tokenizer and chat template (its text is noise, so every valid output is
 * the constraint's doing), and a scripted engine where the reply must be known exactly.
 */
import { QkValueError } from '@qk/ops';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseToolCalls } from '../src/chat/tools.js';
import { type ChatOptions, loadQwen3, Qwen3Model as Model, type Qwen3Model } from '../src/model.js';
import type { ChatMessage, ToolDefinition } from '../src/types.js';
import { smallConfig } from './support/random-model.js';
import { randomSchema, seededRandom } from './support/random-schema.js';
import { scriptedEngine } from './support/scripted-engine.js';
import { charId, stubTokenizer } from './support/stub-tokenizer.js';

const ajv = new Ajv({ strict: false });

function randomWord(rand: () => number, n = 6): string {
  return Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(rand() * 26))).join('');
}

const weatherTool = (name: string): ToolDefinition => ({
  type: 'function',
  function: {
    name,
    description: 'The forecast for a city.',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 12 },
        days: { type: 'integer', minimum: 1, maximum: 7 },
        unit: { enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
});

describe('the tiny model with the real template', () => {
  let model: Qwen3Model;
  const seed = Math.floor(Math.random() * 1000);
  beforeAll(async () => {
    model = await loadQwen3('tiny', { engine: 'cpu', seed, maxContext: 1024 });
  });
  afterAll(() => model?.dispose());

  // Random schemas nest up to four levels (arrays of objects of …): most outputs take tens of tokens, a rare one
  // several hundred; 1000 keeps a 'length' finish out of the way (it would be the noise, not the constraint).
  const maxTokens = 1000;

  it('generate({ schema }): random schemas × seeds all parse and validate', async () => {
    const base = Math.floor(Math.random() * 1e9);
    for (let s = 0; s < 3; s++) {
      const schema = randomSchema(seededRandom(base + s));
      for (const sampleSeed of [1, 2]) {
        // A failure names everything that reproduces it: the schema's seed, the sampler's and the model's.
        const result = await model
          .generate('JSON: ', { schema, maxTokens, seed: sampleSeed, temperature: 1 })
          .result.catch((e: unknown) => {
            throw new Error(
              `schema seed ${base + s}, sample seed ${sampleSeed}, model seed ${seed}: ${String((e as Error)?.message ?? e)} — schema ${JSON.stringify(schema)}`,
              { cause: e },
            );
          });
        expect(result.stats.finishReason, `schema seed ${base + s}`).toBe('stop');
        expect(
          ajv.validate(schema, JSON.parse(result.text)),
          `${JSON.stringify(schema)} → ${result.text}`,
        ).toBe(true);
      }
    }
  }, 300_000);

  it('generate({ grammar }) follows an EBNF grammar', async () => {
    const rand = seededRandom(seed);
    const words = [randomWord(rand, 4), randomWord(rand, 5)];
    const grammar = `root ::= ("${words[0]}" | "${words[1]}") "=" [0-9]{1,3}`;
    const result = await model.generate('x', { grammar, maxTokens: 20, temperature: 1, seed }).result;
    expect(result.text).toMatch(new RegExp(`^(${words.join('|')})=[0-9]{1,3}$`));
    expect(result.stats.finishReason).toBe('stop');
  }, 60_000);

  it('chat({ schema }) without thinking: the content is the JSON, reasoning empty', async () => {
    const schema = randomSchema(seededRandom(seed + 7));
    // A failure names the seed that reproduces it (the model's, which also picks the schema).
    const where = `model seed ${seed}, schema seed ${seed + 7}: ${JSON.stringify(schema)}`;
    const generation = model.chat([{ role: 'user', content: 'Fill the form.' }], {
      schema,
      enableThinking: false,
      maxTokens,
      temperature: 1,
    });
    let result: Awaited<typeof generation.result>;
    try {
      result = await generation.result;
    } catch (e) {
      throw new Error(`${where}: ${String((e as Error)?.message ?? e)}`, { cause: e });
    }
    expect(result.stats.finishReason, where).toBe('stop');
    expect(result.reasoning).toBe('');
    expect(ajv.validate(schema, JSON.parse(result.content)), `${where} → ${result.content}`).toBe(true);
  }, 120_000);

  it('argument errors throw before anything runs', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'hi' }];
    expect(() => model.generate('x', { schema: { type: 'string', format: 'email' } })).toThrow(/"format"/);
    expect(() => model.chat(messages, { tools: [weatherTool('a'), weatherTool('a')] })).toThrow(/unique/);
    expect(() =>
      model.chat(messages, {
        tools: [weatherTool('a')],
        toolChoice: { type: 'function', function: { name: 'b' } },
      }),
    ).toThrow(/not among the tools/);
    expect(() => model.chat(messages, { tools: [weatherTool('a')], schema: { type: 'object' } })).toThrow(
      QkValueError,
    );
    expect(() =>
      model.chat(messages, { tools: [weatherTool('a')], parallelToolCalls: 'no' as unknown as boolean }),
    ).toThrow(/parallelToolCalls/);
  });

  it('a multi-turn tool conversation: calls with valid arguments, tool results back, a final answer', async () => {
    const rand = seededRandom(seed + 1);
    const tools = [weatherTool(`get_${randomWord(rand, 5)}`), weatherTool(`find_${randomWord(rand, 4)}`)];
    const options: ChatOptions = { tools, enableThinking: false, maxTokens: 200, temperature: 1, seed };
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You answer with tools.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather in ' },
          { type: 'text', text: randomWord(rand) },
        ],
      },
    ];
    const transcript: string[] = [];
    const first = await model.chat(messages, { ...options, toolChoice: 'required' }).result;
    expect(first.toolCalls.length).toBeGreaterThan(0);
    // Without parallel calls, a required reply is exactly one call, however the model would go on.
    for (const seed of [1, 2, 3]) {
      const single = await model.chat(messages, {
        ...options,
        seed,
        toolChoice: 'required',
        parallelToolCalls: false,
      }).result;
      expect(single.toolCalls, `seed ${seed}`).toHaveLength(1);
      expect(single.stats.finishReason).toBe('stop');
    }
    expect(first.invalidToolCalls).toEqual([]);
    for (const call of first.toolCalls) {
      const tool = tools.find((t) => t.function.name === call.name)!;
      expect(ajv.validate(tool.function.parameters!, call.arguments)).toBe(true);
      expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
    }
    transcript.push(
      `assistant → ${first.toolCalls.map((c) => `${c.name}(${JSON.stringify(c.arguments)})`).join(', ')}`,
    );
    // Only calls: the content is empty, or holds the one call that maxTokens cut (the noise may call on and on).
    if (first.stats.finishReason === 'stop') expect(first.content).toBe('');
    else
      expect(first.content === '' || first.content.trimStart().startsWith('<tool_call>'), first.content).toBe(
        true,
      );
    messages.push({ role: 'assistant', content: '', toolCalls: first.toolCalls });
    for (const call of first.toolCalls) {
      const output = JSON.stringify({ temperature: Math.round(rand() * 30), call: call.id });
      messages.push({ role: 'tool', content: output, toolCallId: call.id });
      transcript.push(`tool ← ${output}`);
    }
    // The next prompt holds the calls and their results as Qwen3's template writes them.
    const prompt = model.tokenizer.applyChatTemplate(messages, { tools });
    const rendered = parseToolCalls(prompt, tools);
    expect(rendered.toolCalls.map((c) => [c.name, c.arguments])).toEqual(
      first.toolCalls.map((c) => [c.name, c.arguments]),
    );
    expect(prompt).toContain(
      `<tool_response>\n${messages[messages.length - 1]!.content as string}\n</tool_response>`,
    );
    // A second round must call the named tool exactly once; then a plain answer.
    const named = tools[1]!.function.name;
    const second = await model.chat(messages, {
      ...options,
      toolChoice: { type: 'function', function: { name: named } },
    }).result;
    expect(second.toolCalls.map((c) => c.name)).toEqual([named]);
    messages.push({ role: 'assistant', content: second.content, toolCalls: second.toolCalls });
    messages.push({ role: 'tool', content: '{"ok": true}', toolCallId: second.toolCalls[0]!.id });
    const final = await model.chat(messages, { ...options, toolChoice: 'none', maxTokens: 8 }).result;
    expect(final.toolCalls).toEqual([]);
    expect(final.content.length).toBeGreaterThan(0);
    transcript.push(`assistant → ${JSON.stringify(final.content)}`);
    console.info(`tool conversation on the tiny model (seed ${seed}):\n${transcript.join('\n')}`);
  }, 300_000);
});

describe('messages and reasoning with a scripted engine', () => {
  const config = smallConfig({ eosTokenIds: [], vocabSize: 300 });
  const STOP = config.vocabSize - 1;
  function scriptedModel(reply: string): Model {
    const ids = [...reply].map(charId);
    const engine = scriptedEngine(config, 2048, (_context, step) => ids[step] ?? STOP);
    return new Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine });
  }

  it('returns the thinking apart from the answer', async () => {
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    const thought = `${randomWord(rand)} ${randomWord(rand)}`;
    const answer = `${randomWord(rand)}.`;
    const model = scriptedModel(`<think>\n${thought}\n</think>\n\n${answer}`);
    const result = await model.chat([{ role: 'user', content: 'q' }]).result;
    expect(result.reasoning).toBe(thought);
    expect(result.content).toBe(answer);
    expect(result.text).toBe(`<think>\n${thought}\n</think>\n\n${answer}`);
    const off = await scriptedModel(answer).chat([{ role: 'user', content: 'q' }], { enableThinking: false })
      .result;
    expect(off).toMatchObject({ reasoning: '', content: answer });
  });

  it('a template that opens the thinking block itself: the reply starts inside it', async () => {
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    const thought = randomWord(rand);
    const answer = randomWord(rand);
    const ids = [...`${thought}\n</think>\n\n${answer}`].map(charId);
    const engine = scriptedEngine(config, 2048, (_context, step) => ids[step] ?? STOP);
    const stub = stubTokenizer(config.vocabSize);
    const opening = {
      ...stub,
      applyChatTemplate: (...args: Parameters<typeof stub.applyChatTemplate>) =>
        `${stub.applyChatTemplate(...args)}<think>\n`,
    };
    const model = new Model({ config, tokenizer: opening, engine });
    const result = await model.chat([{ role: 'user', content: 'q' }]).result;
    expect(result).toMatchObject({ reasoning: thought, content: answer });
  });

  it('text parts render as the joined string; other parts are refused with a sentence', async () => {
    const { loadTokenizer } = await import('../src/tokenizer/index.js');
    const tokenizer = await loadTokenizer();
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    const pieces = [randomWord(rand), ` ${randomWord(rand)}`, '<|im_end|>'];
    const asParts: ChatMessage[] = [
      { role: 'user', content: pieces.map((text) => ({ type: 'text' as const, text })) },
    ];
    const asString: ChatMessage[] = [{ role: 'user', content: pieces.join('') }];
    expect(tokenizer.applyChatTemplate(asParts)).toBe(tokenizer.applyChatTemplate(asString));
    const encoder = tokenizer as unknown as { encodeChat(m: ChatMessage[]): number[] };
    expect(encoder.encodeChat(asParts)).toEqual(encoder.encodeChat(asString));
    // A special token's text in a tool call's arguments stays text, as in contents.
    const withCall: ChatMessage[] = [
      ...asString,
      {
        role: 'assistant',
        content: null,
        toolCalls: [{ id: 'call_1', name: 'f', arguments: { x: '<|im_start|>' } }],
      },
    ];
    const imStart = tokenizer.encode('<|im_start|>')[0]!;
    const count = (ids: number[]) => ids.filter((id) => id === imStart).length;
    const callIds = encoder.encodeChat(withCall);
    expect(count(callIds)).toBe(count(encoder.encodeChat(asString)) + 1);
    expect(tokenizer.decode(callIds)).toContain('"arguments": {"x": "<|im_start|>"}');
    const image = [
      { role: 'user', content: [{ type: 'image_url', image_url: 'x' }] },
    ] as unknown as ChatMessage[];
    expect(() => tokenizer.applyChatTemplate(image)).toThrow(/text part/);
  });
});

describe('parseToolCalls', () => {
  const tools = [weatherTool('get_weather')];
  it('keeps valid calls, reports the rest with a reason, and leaves the text around them', () => {
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    const city = randomWord(rand);
    const days = 1 + Math.floor(rand() * 7);
    const lead = randomWord(rand);
    const text = [
      `${lead}\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}", "days": ${days}}}\n</tool_call>`,
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": 3}}\n</tool_call>',
      '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
      '<tool_call>\nnot json\n</tool_call>',
      '<tool_call>\n{"name": "get_weather"',
    ].join('\n');
    const parsed = parseToolCalls(text, tools);
    expect(parsed.toolCalls).toHaveLength(1);
    expect(parsed.toolCalls[0]).toMatchObject({ name: 'get_weather', arguments: { city, days } });
    expect(parsed.invalidToolCalls.map((c) => c.reason)).toEqual([
      expect.stringMatching(/do not match the schema/),
      expect.stringMatching(/no tool named "nope"/),
      expect.stringMatching(/not JSON/),
    ]);
    expect(parsed.content.startsWith(lead)).toBe(true);
    expect(parsed.content.endsWith('<tool_call>\n{"name": "get_weather"')).toBe(true);
  });
});
