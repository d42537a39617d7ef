/** Shared by the serve tests: a tiny cpu model behind `startServer` on a random loopback port, and an SSE reader. */
import { loadQwen3, type Qwen3Model } from '@qk/qwen3';
import type { ServeAppOptions } from '../src/serve/app.js';
import { type RunningServer, startServer } from '../src/serve/server.js';

export const MODEL_ID = 'qwen3-tiny';

export function loadTiny(): Promise<Qwen3Model> {
  return loadQwen3('tiny', { engine: 'cpu', maxContext: 1024 });
}

/** A server over `model` on 127.0.0.1 and a free port; `lines` collects its log. */
export async function serveTiny(
  model: Qwen3Model,
  overrides: Partial<ServeAppOptions> = {},
): Promise<{ server: RunningServer; lines: string[] }> {
  const lines: string[] = [];
  const server = await startServer({
    model,
    modelId: MODEL_ID,
    host: '127.0.0.1',
    port: 0,
    maxBodyBytes: 64 * 1024,
    maxPromptTokens: 512,
    maxTokensLimit: 512,
    maxQueue: 32,
    defaults: { maxTokens: 16, temperature: 0, enableThinking: true },
    log: (line) => lines.push(line),
    ...overrides,
  });
  return { server, lines };
}

/** The `data:` events of an SSE body, `[DONE]` kept as a string. */
export function sseEvents(text: string): unknown[] {
  return text
    .split('\n\n')
    .map((block) => block.trim())
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
}

/** Polls `check` every 20 ms until it holds, failing after `ms`. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
