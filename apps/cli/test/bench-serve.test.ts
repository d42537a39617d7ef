/**
 * `qk bench serve` on the tiny cpu model: the soak runs clean and reports what it promises, and the stream checks it
 * relies on catch a real server's stream when it is broken.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  assertValidReport,
  type BenchReport,
  checkChatStream,
  runServeSuite,
  SseReader,
  STREAM_ERROR_KINDS,
  sendChatStream,
} from '@qk/bench';
import type { Qwen3Model } from '@qk/qwen3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveSettings } from '../src/commands/bench-serve.js';
import { chatPromptIds } from '../src/serve/app.js';
import type { RunningServer } from '../src/serve/server.js';
import { qk } from './run-qk.js';
import { loadTiny, MODEL_ID, postJson, serveTiny } from './serve-support.js';

describe('qk bench serve (tiny, cpu)', () => {
  it('serves 4 clients for 3 s without an error and reports speed, memory and prefix reuse', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-bench-serve-'));
    const json = join(dir, 'serve.json');
    const args = ['bench', 'serve', '--cpu', '--duration', '3', '--clients', '4', '--runs', '1'];
    const r = await qk([...args, '--history', '128', '--lengths', '8,24', '--json', json, '--report', dir]);
    expect(r.err).not.toMatch(/Error:/);
    expect(r.code).toBe(0);
    // Progress goes to stderr while it runs; the table to stdout.
    expect(r.err).toMatch(/serve: 4 clients for 3 s/);
    expect(r.out).toContain('**Serving soak**');
    for (const kind of STREAM_ERROR_KINDS) expect(r.out).toContain(`| ${kind} | 0 |`);
    const report = JSON.parse(readFileSync(json, 'utf8')) as BenchReport;
    assertValidReport(report);
    expect(JSON.parse(readFileSync(join(dir, 'serve.json'), 'utf8'))).toEqual(report);
    expect(readFileSync(join(dir, 'serve.md'), 'utf8')).toContain('per-request decode');
    expect(report.errors).toBeUndefined();
    const row = (id: string) => {
      const found = report.rows.find((x) => x.id === id);
      if (found === undefined) throw new Error(`no row ${id} in ${report.rows.map((x) => x.id).join(', ')}`);
      return found;
    };
    const served = row('served-request').extra!;
    // Every client finished at least one request, none failed, and greedy repeats of a prompt agreed.
    expect(served.requests).toBeGreaterThanOrEqual(4);
    expect(served.failed).toBe(0);
    expect(served.divergent).toBe(0);
    expect(served.aggregateTokPerS).toBeGreaterThan(0);
    expect((served.memorySamplesMiB as number[]).length).toBeGreaterThanOrEqual(3);
    const decode = row('served-decode');
    const lone = row('lone-decode');
    expect(decode.tokPerS).toBeGreaterThan(0);
    expect(lone.tokPerS).toBeGreaterThan(0);
    // The ratio is the worst prompt length's: served median over the lone median of the same length.
    const lengths = decode.extra!.promptWords as number[];
    expect(lengths.length).toBeGreaterThanOrEqual(1);
    const loneBy = decode.extra!.loneTokPerSByLength as number[];
    const servedBy = decode.extra!.servedTokPerSByLength as number[];
    const worst = Math.min(...servedBy.map((x, i) => x / loneBy[i]!));
    const ratio = decode.peers.lone;
    expect(ratio && 'ratio' in ratio && ratio.ratio).toBeCloseTo(worst, 9);
    expect(decode.bar?.met).toBe(worst >= 0.9);
    for (const w of lengths) expect(r.out).toContain(`prompts of ~${w} words`);
    // The server's own generations were timed too (the engine's view, without HTTP).
    expect(decode.extra?.engineTokPerS).toBeGreaterThan(0);
    expect(row('served-ttft').timing.median).toBeGreaterThan(0);
    // Turn 3 reused the history's rows; the cold request after forgetPrefix() reused none.
    const warm = row('prefix-warm');
    const cold = row('prefix-cold');
    expect(warm.params.cachedTokens).toBeGreaterThan(100);
    expect(warm.params.cachedTokens).toBeLessThan(warm.params.promptTokens as number);
    expect(cold.params.cachedTokens).toBe(0);
    expect(warm.timing.median).toBeLessThan(cold.timing.median);
    // The turns went through the soak's client, off the server's event loop.
    expect(r.out).toContain("sent by the soak's client (in a child process of their own)");
  }, 180_000);

  it('refuses a port in use before loading the model, and settings it cannot honour', async () => {
    const taken = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    const port = (taken.address() as { port: number }).port;
    try {
      const r = await qk(['bench', 'serve', '--cpu', '--port', String(port)]);
      expect(r.code).toBe(2);
      expect(r.err).toContain(`port ${port} on 127.0.0.1 is in use`);
      expect(r.err).not.toContain('loading');
    } finally {
      taken.close();
    }
    expect(() => serveSettings({ engines: 'layered,megakernel' }, false)).toThrow(/one engine per run/);
    expect(() => serveSettings({ tokens: '1' }, true)).toThrow(/--tokens must be at least 2/);
    expect(serveSettings({}, true)).toMatchObject({ engine: 'cpu', clients: 16, durationMs: 120_000 });
  });
});

describe('the soak’s stream checks on a real server', () => {
  let model: Qwen3Model;
  let server: RunningServer;
  beforeAll(async () => {
    model = await loadTiny();
    server = (await serveTiny(model)).server;
  });
  afterAll(async () => {
    await server?.close();
    model?.dispose();
  });

  const ask = (content: string) => [{ role: 'user' as const, content }];
  const body = (content: string) => ({
    model: MODEL_ID,
    messages: ask(content),
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 6,
    temperature: 0,
  });
  const events = async (content: string) => {
    const text = await (await postJson(`${server.url}/v1/chat/completions`, body(content))).text();
    return new SseReader().push(text, 0);
  };
  const expectFor = (content: string) => ({
    model: MODEL_ID,
    promptTokens: chatPromptIds(model, ask(content), true, undefined).length,
    maxTokens: 6,
  });

  it("sends a request's own max_tokens in place of the soak's, and checks its usage against it", async () => {
    const messages = ask('a request with its own token limit');
    const request = {
      messages,
      key: 'own-limit',
      // (sendChatStream asks with thinking off)
      promptTokens: chatPromptIds(model, messages, false, undefined).length,
      maxTokens: 2,
    };
    const record = await sendChatStream({ url: server.url, model: MODEL_ID, maxTokens: 40 }, request, 0);
    expect(record.outcome.errors).toEqual([]);
    expect(record.outcome.completionTokens).toBeLessThanOrEqual(2);
  });

  it('passes a real stream, and catches it with a chunk of another stream spliced in', async () => {
    const mine = await events('the first question');
    const theirs = await events('a second, longer question about something else');
    expect(checkChatStream(mine, expectFor('the first question')).errors).toEqual([]);
    const spliced = [...mine.slice(0, 2), theirs[2]!, ...mine.slice(3)];
    const kinds = checkChatStream(spliced, expectFor('the first question')).errors.map((e) => e.kind);
    expect(kinds).toContain('mixed');
    // Another request's whole stream: its usage counts another prompt.
    const swapped = checkChatStream(theirs, expectFor('the first question')).errors.map((e) => e.kind);
    expect(swapped).toEqual(['mixed']);
    // Cut before the end.
    const cut = checkChatStream(mine.slice(0, -1), expectFor('the first question')).errors.map((e) => e.kind);
    expect(cut).toEqual(['no-done']);
  });

  it('fails the flatness bar when GPU memory keeps growing after warm-up', async () => {
    let samples = 0;
    const MiB = 2 ** 20;
    const report = await runServeSuite({
      backend: 'cpu',
      target: {
        url: server.url,
        model: MODEL_ID,
        engine: 'cpu',
        source: 'tiny',
        promptTokens: (messages) => chatPromptIds(model, messages, false, undefined).length,
        chat: async (messages, maxTokens) =>
          (await model.chat(messages, { maxTokens, temperature: 0, enableThinking: false }).result).stats,
        forgetPrefix: () => model.forgetPrefix(),
        // A leak of 100 MiB between samples, as a GPU reading would show it.
        memory: () => ({ rssBytes: 1, deviceUsedBytes: 2 ** 30 + 100 * MiB * samples++ }),
      },
      clients: 2,
      durationMs: 2000,
      maxTokens: 3,
      promptLengths: [4],
      historyTokens: 0,
      runs: 1,
      leakBytes: 64 * MiB,
    });
    assertValidReport(report);
    expect(report.errors).toBeUndefined();
    const extra = report.rows.find((r) => r.id === 'served-request')!.extra!;
    const drift = extra.memoryDriftMiB as number;
    expect(drift).toBeGreaterThanOrEqual(100);
    expect(drift % 100).toBe(0);
    const line = report.tables![0]!.rows.find((r) => r[0]!.includes('max − min after warm-up'))!;
    expect(line[2]).toMatch(/✗$/);
    expect(report.rows.some((r) => r.id === 'prefix-warm')).toBe(false);
  });

  it('counts a refused request as an http error, with its status', async () => {
    const record = await sendChatStream(
      { url: server.url, model: 'not-this-model', maxTokens: 4 },
      { messages: ask('hi'), key: 'k', promptTokens: 1 },
      0,
    );
    expect(record.outcome.errors.map((e) => e.kind)).toEqual(['http']);
    expect(record.outcome.errors[0]!.message).toMatch(/^status 404/);
  });
});
