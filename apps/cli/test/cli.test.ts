/** The built `qk` command, run as a user runs it (a child process). GPU-dependent output is checked per machine. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cudaAvailable } from '@qk/ops';
import { describe, expect, it } from 'vitest';

const main = resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');
const gpu = cudaAvailable();

function qk(...args: string[]) {
  if (!existsSync(main))
    throw new Error(`${main} is missing: build @qk/cli first (turbo runs build before test)`);
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 600_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('qk', () => {
  it('prints help and the version', () => {
    const help = qk('--help');
    expect(help.code).toBe(0);
    for (const cmd of ['generate', 'chat', 'model', 'verify', 'bench', 'info'])
      expect(help.out).toContain(cmd);
    expect(help.out).toContain('--model DIR');
    expect(qk('--version').out).toMatch(/^qk \d+\.\d+\.\d+/);
    expect(qk().code).toBe(2);
  });

  it('refuses unknown commands and options with exit 2 and a pointer to help', () => {
    const unknown = qk('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown command "frobnicate"');
    const badOption = qk('verify', '--no-such-option');
    expect(badOption.code).toBe(2);
    expect(badOption.err).toContain('qk verify --help');
    const badSeed = qk('verify', '--seed', 'abc');
    expect(badSeed.code).toBe(2);
    expect(badSeed.err).toContain('--seed');
    expect(qk('bench', 'nope').err).toContain('unknown suite "nope"');
  });

  it('has help for every command', () => {
    for (const cmd of ['generate', 'chat', 'model', 'verify', 'bench', 'info']) {
      const r = qk(cmd, '--help');
      expect(r.code, cmd).toBe(0);
      expect(r.out).toContain(`qk ${cmd}`);
    }
  });

  it.runIf(!gpu)('verify without a GPU says so and reports every case as skipped, not passed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-verify-'));
    const r = qk('verify', '--filter', 'rmsnorm', '--json', join(dir, 'v.json'));
    expect(r.code).toBe(0);
    expect(r.out).toContain('No usable GPU');
    expect(r.out).toContain('SKIPPED, not passed');
    const report = JSON.parse(readFileSync(join(dir, 'v.json'), 'utf8'));
    expect(report.passed).toBe(0);
    expect(report.failed).toBe(0);
    expect(report.skipped).toBeGreaterThan(0);
    expect(report.rows.every((row: { status: string }) => row.status === 'skipped')).toBe(true);
  });

  it.runIf(!gpu)('bench ops without a GPU is skipped with the reason', () => {
    const r = qk('bench', 'ops', '--no-peers');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/skipped — .*cuda/);
  });

  it.runIf(gpu)('verify passes on the GPU for the RMSNorm family', () => {
    const r = qk('verify', '--filter', 'rmsnorm');
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/\d+ passed, 0 failed, 0 skipped/);
  });
});
