/**
 * Runs the built `qk` as a user does (a child process), optionally with stdin. Asynchronous on purpose: a test
 * worker blocked in a synchronous child for long (a loaded CI machine) misses vitest's own RPC deadlines.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const QK_MAIN = resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');

export interface QkResult {
  code: number | null;
  out: string;
  err: string;
}

export function qk(args: readonly string[], input?: string, timeoutMs = 600_000): Promise<QkResult> {
  if (!existsSync(QK_MAIN))
    throw new Error(`${QK_MAIN} is missing: build @qk/cli first (turbo runs build before test)`);
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [QK_MAIN, ...args], {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
    });
    child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      err += s;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, out, err });
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}
