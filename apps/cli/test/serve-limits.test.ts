/**
 * `qk serve` when things go wrong or get busy: OpenAI-shaped errors with their status codes, API keys, limits,
 * clients that leave (their generation stops at once), and many clients at once (FIFO, none lost, none mixed).
 * Tiny preset on the cpu engine, loopback only.
 */
import { type IncomingHttpHeaders, request } from 'node:http';
import type { Qwen3Model } from '@qk/qwen3';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/serve/server.js';
import { loadTiny, MODEL_ID, postJson, serveTiny, sseEvents, waitFor } from './serve-support.js';

let model: Qwen3Model;
let server: RunningServer;
let lines: string[];
let chatUrl: string;

beforeAll(async () => {
  model = await loadTiny();
  ({ server, lines } = await serveTiny(model, { maxPromptTokens: 64, maxBodyBytes: 4096, maxQueue: 12 }));
  chatUrl = `${server.url}/v1/chat/completions`;
}, 60_000);

afterAll(async () => {
  await server?.close();
  model?.dispose();
});

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

async function expectError(response: Response, status: number, code: string | null, param?: string) {
  expect(response.status).toBe(status);
  const body = (await response.json()) as ErrorBody;
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(body.error.code).toBe(code);
  if (param !== undefined) expect(body.error.param).toBe(param);
  // A sentence, not a stack.
  expect(body.error.message).toMatch(/^[A-Z'].{10,}[.)]$/);
  expect(body.error.message).not.toContain('    at ');
  return body.error;
}

const hi = [{ role: 'user', content: 'hi' }];

describe('qk serve errors', () => {
  it('refuses bad JSON, a body that is not an object, and missing or malformed fields', async () => {
    await expectError(await postJson(chatUrl, '{"model": '), 400, 'invalid_json');
    await expectError(await postJson(chatUrl, '[1, 2]'), 400, null);
    await expectError(await postJson(chatUrl, { messages: hi }), 400, 'missing_required_parameter', 'model');
    await expectError(
      await postJson(chatUrl, { model: MODEL_ID }),
      400,
      'missing_required_parameter',
      'messages',
    );
    await expectError(
      await postJson(chatUrl, { model: MODEL_ID, messages: [{ role: 'wizard', content: 'x' }] }),
      400,
      'invalid_value',
      'messages[0].role',
    );
    for (const [field, value] of [
      ['temperature', 3],
      ['top_p', -1],
      ['max_tokens', 0],
      ['seed', 1.5],
      ['n', 2],
      ['stop', ['a', 'b', 'c', 'd', 'e']],
      ['parallel_tool_calls', 'no'],
    ] as const) {
      await expectError(
        await postJson(chatUrl, { model: MODEL_ID, messages: hi, [field]: value }),
        400,
        'invalid_value',
        field,
      );
    }
  });

  it('answers an unknown model with 404, through the openai client too', async () => {
    const error = await expectError(
      await postJson(chatUrl, { model: 'gpt-4o', messages: hi }),
      404,
      'model_not_found',
      'model',
    );
    expect(error.message).toContain(MODEL_ID);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 });
    await expect(
      client.chat.completions.create({ model: 'gpt-4o', messages: hi as never }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expectError(await fetch(`${server.url}/v1/embeddings`, { method: 'POST' }), 404, 'unknown_url');
  });

  it('enforces the prompt, max_tokens and body limits with a 4xx and a sentence', async () => {
    const long = [{ role: 'user', content: 'word '.repeat(200) }];
    const tooLong = await expectError(
      await postJson(chatUrl, { model: MODEL_ID, messages: long }),
      400,
      'context_length_exceeded',
    );
    expect(tooLong.message).toMatch(/64 tokens/);
    const completions = `${server.url}/v1/completions`;
    await expectError(
      await postJson(completions, { model: MODEL_ID, prompt: 'word '.repeat(200) }),
      400,
      'context_length_exceeded',
    );
    await expectError(
      await postJson(chatUrl, { model: MODEL_ID, messages: hi, max_tokens: 100_000 }),
      400,
      'invalid_value',
      'max_tokens',
    );
    await expectError(
      await postJson(chatUrl, { model: MODEL_ID, messages: [{ role: 'user', content: 'x'.repeat(5000) }] }),
      413,
      'request_too_large',
    );
    await expectError(
      await postJson(completions, { model: MODEL_ID, prompt: [1, 2, 10_000_000] }),
      400,
      'invalid_value',
      'prompt',
    );
    // The server is still well.
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it('checks the API key on every route', async () => {
    const { server: locked } = await serveTiny(model, { apiKey: 'sekrit' });
    try {
      await expectError(await fetch(`${locked.url}/health`), 401, 'missing_api_key');
      await expectError(
        await fetch(`${locked.url}/v1/models`, { headers: { authorization: 'Bearer wrong' } }),
        401,
        'invalid_api_key',
      );
      await expectError(
        await postJson(
          `${locked.url}/v1/chat/completions`,
          { model: MODEL_ID, messages: hi },
          { authorization: 'Bearer sekrit2' },
        ),
        401,
        'invalid_api_key',
      );
      const bad = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
      await expect(bad.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
      const good = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'sekrit', maxRetries: 0 });
      expect((await good.models.list()).data[0]!.id).toBe(MODEL_ID);
      const reply = await good.chat.completions.create({
        model: MODEL_ID,
        messages: hi as never,
        max_tokens: 2,
      });
      expect(reply.usage?.completion_tokens).toBeGreaterThan(0);
    } finally {
      await locked.close();
    }
  });
});

describe('qk serve and web pages', () => {
  /** A raw request with the headers a browser sends (fetch cannot set Host). */
  function browserRequest(url: string, method: string, headers: Record<string, string>, body?: string) {
    return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((done, fail) => {
      const req = request(url, { method, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => done({ status: res.statusCode!, headers: res.headers, body: text }));
      });
      req.on('error', fail);
      req.end(body);
    });
  }
  const chat = JSON.stringify({ model: MODEL_ID, messages: hi, max_tokens: 1 });
  const json = { 'content-type': 'application/json' };

  it("serves its own page's requests and refuses other origins, a rebound DNS name included", async () => {
    const own = await browserRequest(chatUrl, 'POST', { ...json, origin: server.url }, chat);
    expect(own.status).toBe(200);
    const other = await browserRequest(chatUrl, 'POST', { ...json, origin: 'https://evil.example' }, chat);
    expect(other.status).toBe(403);
    expect(JSON.parse(other.body).error.code).toBe('origin_not_allowed');
    const { port } = new URL(server.url);
    const rebound = await browserRequest(
      chatUrl,
      'POST',
      { ...json, origin: `http://evil.example:${port}`, host: `evil.example:${port}` },
      chat,
    );
    expect(rebound.status).toBe(403);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('lets the origins it was told to allow call it, with CORS preflights', async () => {
    const { server: open } = await serveTiny(model, { allowedOrigins: ['http://localhost:3000'] });
    try {
      const url = `${open.url}/v1/chat/completions`;
      const preflight = await browserRequest(url, 'OPTIONS', {
        origin: 'http://localhost:3000',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, authorization',
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe('http://localhost:3000');
      expect(preflight.headers['access-control-allow-headers']).toBe('content-type, authorization');
      const post = await browserRequest(url, 'POST', { ...json, origin: 'http://localhost:3000' }, chat);
      expect(post.status).toBe(200);
      expect(post.headers['access-control-allow-origin']).toBe('http://localhost:3000');
      const other = await browserRequest(url, 'POST', { ...json, origin: 'http://localhost:3001' }, chat);
      expect(other.status).toBe(403);
    } finally {
      await open.close();
    }
  });
});

/** Requests running or waiting, from /health. */
async function queued(): Promise<number> {
  return ((await (await fetch(`${server.url}/health`)).json()) as { queued: number }).queued;
}

describe('qk serve under load', () => {
  it('stops a streamed generation as soon as its client disconnects', async () => {
    const controller = new AbortController();
    const response = await fetch(chatUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, messages: hi, max_tokens: 500, stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read(); // the first event: the generation is under way
    const before = lines.length;
    controller.abort();
    await waitFor(async () => (await queued()) === 0, 3000, 'the generation to stop');
    await waitFor(
      () => lines.slice(before).some((l) => l.includes('client disconnected')),
      3000,
      'the log line',
    );
    // 500 tokens take many seconds here: it was cancelled, not finished.
    expect(lines.slice(before).join('\n')).not.toMatch(/200 · prompt/);
  });

  it('stops a non-streamed generation, and one still waiting in the queue, when their clients leave', async () => {
    const long = (signal: AbortSignal) =>
      fetch(chatUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL_ID, messages: hi, max_tokens: 500 }),
        signal,
      }).catch(() => undefined);
    const running = new AbortController();
    const waiting = new AbortController();
    const first = long(running.signal);
    await waitFor(async () => (await queued()) === 1, 3000, 'the first request to start');
    const second = long(waiting.signal);
    await waitFor(async () => (await queued()) === 2, 3000, 'the second request to queue');
    waiting.abort();
    await waitFor(async () => (await queued()) === 1, 3000, 'the queued request to leave');
    running.abort();
    await waitFor(async () => (await queued()) === 0, 3000, 'the running request to stop');
    await Promise.all([first, second]);
    // The model is free again: a new request is answered.
    const response = await postJson(chatUrl, { model: MODEL_ID, messages: hi, max_tokens: 2 });
    expect(response.status).toBe(200);
  });

  it('serves 8 concurrent streaming clients in arrival order, none lost, none mixed', async () => {
    const prompts = Array.from({ length: 8 }, (_, i) => `client ${i}: tell me about the number ${i * 7}`);
    const request = (i: number, stream: boolean) => ({
      model: MODEL_ID,
      messages: [{ role: 'user', content: prompts[i] }],
      max_tokens: 4 + (i % 3),
      temperature: 0.7,
      seed: i,
      stream,
    });
    // What each client should get: its request answered alone.
    const alone: string[] = [];
    for (let i = 0; i < 8; i++) {
      const body = (await (await postJson(chatUrl, request(i, false))).json()) as {
        choices: [{ message: { content: string } }];
      };
      alone.push(body.choices[0].message.content);
    }
    const finished: number[] = [];
    const responses: Promise<string>[] = [];
    for (let i = 0; i < 8; i++) {
      // Each request is in the model's queue once its response has begun, so the arrival order is 0…7.
      const response = await postJson(chatUrl, request(i, true));
      expect(response.status).toBe(200);
      responses.push(
        response.text().then((text) => {
          finished.push(i);
          return text;
        }),
      );
    }
    const bodies = await Promise.all(responses);
    expect(finished).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    bodies.forEach((text, i) => {
      const events = sseEvents(text);
      expect(events.at(-1)).toBe('[DONE]');
      const chunks = events.slice(0, -1) as { id: string; choices: { delta: { content?: string } }[] }[];
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
      expect(content, `client ${i}`).toBe(alone[i]);
    });
    expect(await queued()).toBe(0);
  });

  it('answers 429 when the queue is full, and serves the queue once it drains', async () => {
    const body = { model: MODEL_ID, messages: hi, max_tokens: 10 };
    const results = await Promise.all(Array.from({ length: 16 }, () => postJson(chatUrl, body)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(12);
    expect(statuses).toContain(429);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    for (const r of results) if (r.status === 429) await expectError(r, 429, 'queue_full');
    expect((await postJson(chatUrl, body)).status).toBe(200);
  });
});
