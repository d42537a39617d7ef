/**
 * `qk serve` against the clients users point at it: the official `openai` package and the Vercel AI SDK's
 * OpenAI-compatible provider, streaming and not, on the tiny preset (cpu engine) on a random loopback port.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { Qwen3Model } from '@qk/qwen3';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/serve/server.js';
import { loadTiny, MODEL_ID, postJson, serveTiny } from './serve-support.js';

let model: Qwen3Model;
let server: RunningServer;
let client: OpenAI;

beforeAll(async () => {
  model = await loadTiny();
  ({ server } = await serveTiny(model));
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
}, 60_000);

afterAll(async () => {
  await server?.close();
  model?.dispose();
});

const messages = [{ role: 'user' as const, content: 'Write a haiku about GPUs.' }];

describe('qk serve with the openai client', () => {
  it('lists the model', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual([MODEL_ID]);
    expect((await client.models.retrieve(MODEL_ID)).id).toBe(MODEL_ID);
  });

  it('answers a chat, with usage, and streams the same reply token by token', async () => {
    const whole = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      max_tokens: 6,
      temperature: 0,
    });
    expect(whole.object).toBe('chat.completion');
    const choice = whole.choices[0]!;
    expect(choice.finish_reason).toMatch(/^(length|stop)$/);
    expect(choice.message.role).toBe('assistant');
    expect(whole.usage?.prompt_tokens).toBeGreaterThan(5);
    expect(whole.usage?.completion_tokens).toBeGreaterThan(0);
    expect(whole.usage?.total_tokens).toBe(whole.usage!.prompt_tokens + whole.usage!.completion_tokens);

    const stream = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      max_completion_tokens: 6,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let reasoning = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    const ids = new Set<string>();
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      ids.add(chunk.id);
      const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      content += delta?.content ?? '';
      reasoning += delta?.reasoning_content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(ids.size).toBe(1);
    expect(chunks).toBeGreaterThan(2);
    expect(content).toBe(choice.message.content);
    expect(reasoning).toBe((choice.message as { reasoning_content?: string }).reasoning_content ?? '');
    expect(finish).toBe(choice.finish_reason);
    expect(usage?.completion_tokens).toBe(whole.usage?.completion_tokens);
    expect(usage?.prompt_tokens).toBe(whole.usage?.prompt_tokens);
    // The same conversation again: its prompt is in the cache, all but the last token.
    expect(usage?.prompt_tokens_details?.cached_tokens).toBe(usage!.prompt_tokens - 1);
  });

  it('continues a prompt through /v1/completions, streamed and not, with seeds that repeat', async () => {
    const request = { model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 5, temperature: 0.8, seed: 7 };
    const first = await client.completions.create(request);
    const again = await client.completions.create(request);
    expect(first.object).toBe('text_completion');
    expect(again.choices[0]!.text).toBe(first.choices[0]!.text);
    expect(first.usage?.prompt_tokens).toBe(4);
    let streamed = '';
    for await (const chunk of await client.completions.create({ ...request, stream: true }))
      streamed += chunk.choices[0]?.text ?? '';
    expect(streamed).toBe(first.choices[0]!.text);
  });

  it('sets Qwen3 thinking per request (the template adds an empty think block when it is off)', async () => {
    const ask = async (enable_thinking: boolean) => {
      const response = await postJson(`${server.url}/v1/chat/completions`, {
        model: MODEL_ID,
        messages,
        max_tokens: 1,
        enable_thinking,
      });
      expect(response.status).toBe(200);
      return (await response.json()) as {
        usage: { prompt_tokens: number };
        choices: [{ message: Record<string, unknown> }];
      };
    };
    const on = await ask(true);
    const off = await ask(false);
    expect(off.usage.prompt_tokens).toBeGreaterThan(on.usage.prompt_tokens);
    expect('reasoning_content' in on.choices[0].message).toBe(true);
    expect('reasoning_content' in off.choices[0].message).toBe(false);
  });
});

describe('qk serve with the Vercel AI SDK', () => {
  const provider = () =>
    createOpenAICompatible({ name: 'qk', baseURL: `${server.url}/v1`, includeUsage: true });

  it('generates and streams text with usage', async () => {
    const qk = provider();
    const whole = await generateText({
      model: qk.chatModel(MODEL_ID),
      prompt: 'Name three colours.',
      maxOutputTokens: 6,
      temperature: 0,
      maxRetries: 0,
    });
    expect(whole.usage.inputTokens).toBeGreaterThan(5);
    expect(whole.usage.outputTokens).toBeGreaterThan(0);
    const streamed = streamText({
      model: qk.chatModel(MODEL_ID),
      prompt: 'Name three colours.',
      maxOutputTokens: 6,
      temperature: 0,
      maxRetries: 0,
    });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    expect(text).toBe(whole.text);
    expect((await streamed.usage).outputTokens).toBe(whole.usage.outputTokens);
    expect(await streamed.reasoningText).toBe(whole.reasoningText);
  });

  it('completes text with the completion model', async () => {
    const result = await generateText({
      model: provider().completionModel(MODEL_ID),
      prompt: 'The quick brown fox',
      maxOutputTokens: 4,
      temperature: 0,
      maxRetries: 0,
    });
    // The SDK renders the prompt as a "user: … assistant:" transcript first.
    expect(result.usage.inputTokens).toBeGreaterThanOrEqual(4);
    expect(['length', 'stop']).toContain(result.finishReason);
  });
});
