/** `qk serve` as a user runs it: the built command in a child process, its help, its flags, and Ctrl-C. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { qk } from './run-qk.js';
import { postJson, sseEvents } from './serve-support.js';

const main = resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');

describe('qk serve (the command)', () => {
  it('has help, and refuses bad flags with a usage error', async () => {
    const help = await qk(['serve', '--help']);
    expect(help.code).toBe(0);
    for (const text of [
      '/v1/chat/completions',
      '--port',
      '--host',
      '--api-key',
      '127.0.0.1',
      'reasoning_content',
      '--model DIR',
    ])
      expect(help.out).toContain(text);
    expect((await qk(['--help'])).out).toContain('serve');
    for (const args of [
      ['--port', 'abc'],
      ['--port', '70000'],
      ['--max-queue', '0'],
      ['--api-key', ''],
      ['extra'],
    ]) {
      const r = await qk(['serve', ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toContain('qk serve --help');
    }
  });

  it('loads the model once, serves requests on a free port, and stops on SIGINT', async () => {
    const child = spawn(
      process.execPath,
      [main, 'serve', '--preset', 'tiny', '--engine', 'cpu', '--port', '0', '--max-tokens', '4'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let err = '';
    child.stderr.setEncoding('utf8');
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    try {
      const url = await new Promise<string>((found, fail) => {
        const timer = setTimeout(() => fail(new Error(`no URL within 60 s:\n${err}`)), 60_000);
        child.stderr.on('data', (chunk: string) => {
          err += chunk;
          const match = /on (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(err);
          if (match) {
            clearTimeout(timer);
            found(match[1]!);
          }
        });
        child.on('exit', () => fail(new Error(`qk serve exited:\n${err}`)));
      });
      const health = (await (await fetch(`${url}/health`)).json()) as { model: string; engine: string };
      expect(health).toMatchObject({ model: 'qwen3-tiny', engine: 'cpu' });
      const messages = [{ role: 'user', content: 'Hello!' }];
      const whole = (await (
        await postJson(`${url}/v1/chat/completions`, { model: 'qwen3-tiny', messages })
      ).json()) as {
        usage: { completion_tokens: number };
      };
      expect(whole.usage.completion_tokens).toBeLessThanOrEqual(4);
      const streamed = sseEvents(
        await (
          await postJson(`${url}/v1/chat/completions`, { model: 'qwen3-tiny', messages, stream: true })
        ).text(),
      );
      expect(streamed.at(-1)).toBe('[DONE]');
      child.kill('SIGINT');
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 15_000))]);
      expect(code).toBe(0);
      expect(err).toContain('POST /v1/chat/completions 200');
      expect(err.match(/loading tiny/g)?.length).toBeGreaterThan(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
