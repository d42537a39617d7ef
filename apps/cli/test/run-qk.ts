/** Runs the built `qk` as a user does (a child process), optionally with stdin. */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const main = resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');

export function qk(
  args: readonly string[],
  input?: string,
): { code: number | null; out: string; err: string } {
  if (!existsSync(main))
    throw new Error(`${main} is missing: build @qk/cli first (turbo runs build before test)`);
  const r = spawnSync(process.execPath, [main, ...args], {
    encoding: 'utf8',
    timeout: 600_000,
    ...(input === undefined ? { stdio: ['ignore', 'pipe', 'pipe'] } : { input }),
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
