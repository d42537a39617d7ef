/**
 * Signals on the GPU engines (issue #51): SIGINT and SIGTERM stop `qk generate` on `layered` and `megakernel` while
 * the weights load, while the prompt prefills and while it decodes, within 1 s of the signal, with exit 130 and
 * nothing left half-printed. The cpu engine's cases are in hardening.test.ts. GPU only: skipped, visibly, where no
 * GPU is usable (the megakernel: Hopper).
 *
 * The CLI runs as a child process: `dist/main.js`, or `QK_CLI` (the bundled `qk.mjs` on a GPU host). The prefill
 * case first times an uninterrupted run of the same prompt, then sends the signal halfway through its prefill.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, cudaDeviceInfo, useCudaBackend } from '@qk/ops';
import { afterAll, describe, expect, it } from 'vitest';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();
const hopper = gpu && cudaDeviceInfo().computeCapability.major >= 9;
const main = process.env.QK_CLI ?? resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');
/** What the issue asks: stopped within 1 s of the signal. */
const STOP_MS = 1000;

interface Run {
  code: number | null;
  /** From the signal to the child's exit (whole process, GPU teardown included). */
  ms: number;
  out: string;
  err: string;
}

/**
 * Runs `qk generate` with `args` (prompt on stdin). Once stderr (or stdout, with `onStdout`) matches `when`, waits
 * `delayMs` and sends `signal`; without `when` it runs to the end.
 */
async function generate(
  args: string[],
  prompt: string,
  trigger?: { when: RegExp; onStdout?: boolean; delayMs?: number; signal?: NodeJS.Signals },
): Promise<Run> {
  const child = spawn(process.execPath, [main, 'generate', '-', ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end(prompt);
  let out = '';
  let err = '';
  let sentAt = 0;
  const closed = new Promise<number | null>((done) => child.on('close', (c) => done(c)));
  const killer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  let fired = false;
  const maybeFire = () => {
    if (trigger === undefined || fired) return;
    if (!trigger.when.test(trigger.onStdout ? out : err)) return;
    fired = true;
    setTimeout(() => {
      sentAt = performance.now();
      child.kill(trigger.signal ?? 'SIGINT');
    }, trigger.delayMs ?? 0);
  };
  child.stdout.on('data', (d) => {
    out += String(d);
    maybeFire();
  });
  child.stderr.on('data', (d) => {
    err += String(d);
    maybeFire();
  });
  const code = await closed;
  clearTimeout(killer);
  if (trigger !== undefined) expect(fired, `the trigger ${trigger.when} never matched: ${err}`).toBe(true);
  return { code, ms: sentAt === 0 ? 0 : performance.now() - sentAt, out, err };
}

/** The `qk model init` child: a 0.6B checkpoint of random weights at the real shapes. */
async function init(dir: string): Promise<void> {
  const child = spawn(process.execPath, [main, 'model', 'init', '--preset', '0.6b', '--out', dir], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => {
    err += String(d);
  });
  const code = await new Promise<number | null>((done) => child.on('close', (c) => done(c)));
  expect(code, err).toBe(0);
}

let root: string | undefined;
let made: Promise<string> | undefined;
/** The checkpoint, made by the first test that needs it. */
function modelDir(): Promise<string> {
  made ??= (async () => {
    root = await mkdtemp(join(tmpdir(), 'qk-signals-gpu-'));
    const dir = join(root, 'qwen3-0.6b');
    await init(dir);
    return dir;
  })();
  return made;
}
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

function expectStopped(r: Run, what: string): void {
  console.log(`${what}: exit ${r.code} ${r.ms.toFixed(0)} ms after the signal`);
  expect(r.code, r.err).toBe(130);
  expect(r.err).toContain('[stopped]');
  expect(/\n\s+at /.test(r.err), r.err).toBe(false);
  expect(r.ms, what).toBeLessThan(STOP_MS);
}

describe.skipIf(!gpu)('signals stop qk generate on the GPU engines', () => {
  for (const [engine, usable] of [
    ['layered', gpu],
    ['megakernel', hopper],
  ] as const) {
    const base = async () => ['--model', await modelDir(), '--engine', engine];

    it.skipIf(!usable)(
      `${engine}: SIGINT while the weights load`,
      async () => {
        const r = await generate([...(await base()), '--max-tokens', '4'], 'hi', { when: /loading .*\d+%/ });
        expectStopped(r, `${engine} load`);
        expect(r.out).toBe('');
      },
      120_000,
    );

    it.skipIf(!usable)(
      `${engine}: SIGINT halfway through a long prefill, before any token`,
      async () => {
        // ~19k tokens (about 3.9 per word) in chunks of 512: tens of chunks, each a point where the stop is seen.
        const prompt = Array.from({ length: 5_000 }, (_, i) => `w${i % 997}`).join(' ');
        const args = [
          ...(await base()),
          '--max-tokens',
          '2',
          '--max-context',
          '32768',
          '--prefill-chunk',
          '512',
        ];
        const plain = await generate(args, prompt);
        expect(plain.code, plain.err).toBe(0);
        const stats = plain.err.match(/prefill ([\d.]+) ms · TTFT ([\d.]+) ms/);
        expect(stats === null, plain.err).toBe(false);
        const [prefill, ttft] = [Number(stats![1]), Number(stats![2])];
        // The signal goes out when the load's last line appears, plus the time until the prefill is half done.
        const delayMs = Math.max(0, ttft - prefill / 2);
        console.log(
          `${engine} prefill: ${prefill} ms, TTFT ${ttft} ms; signal ${delayMs.toFixed(0)} ms after the load`,
        );
        const r = await generate(args, prompt, { when: /done in/, delayMs });
        expectStopped(r, `${engine} prefill`);
        expect(r.out).toBe('');
      },
      300_000,
    );

    it.skipIf(!usable)(
      `${engine}: SIGINT and SIGTERM while it decodes`,
      async () => {
        for (const signal of ['SIGINT', 'SIGTERM'] as const) {
          const r = await generate(
            [...(await base()), '--max-tokens', '4000', '--max-context', '8192', '--temperature', '0.8'],
            'Count: 1, 2,',
            { when: /\S/, onStdout: true, delayMs: 200, signal },
          );
          expectStopped(r, `${engine} decode, ${signal}`);
        }
      },
      120_000,
    );
  }
});
