/** The built `qk` command, run as a user runs it (a child process). GPU-dependent output is checked per machine. */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cudaAvailable } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { qk as runQk } from './run-qk.js';

const main = resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist/main.js');
const gpu = cudaAvailable();

const qk = (...args: string[]) => runQk(args);

describe('qk', () => {
  it('prints help and the version', async () => {
    const help = await qk('--help');
    expect(help.code).toBe(0);
    for (const cmd of ['generate', 'chat', 'model', 'verify', 'bench', 'info'])
      expect(help.out).toContain(cmd);
    expect(help.out).toContain('--model DIR');
    expect((await qk('--version')).out).toMatch(/^qk \d+\.\d+\.\d+/);
    expect((await qk()).code).toBe(2);
  });

  it('refuses unknown commands and options with exit 2 and a pointer to help', async () => {
    const unknown = await qk('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown command "frobnicate"');
    const badOption = await qk('verify', '--no-such-option');
    expect(badOption.code).toBe(2);
    expect(badOption.err).toContain('qk verify --help');
    const badSeed = await qk('verify', '--seed', 'abc');
    expect(badSeed.code).toBe(2);
    expect(badSeed.err).toContain('--seed');
    expect((await qk('bench', 'nope')).err).toContain('unknown suite "nope"');
  });

  it('has help for every command', async () => {
    for (const cmd of ['generate', 'chat', 'model', 'verify', 'bench', 'info']) {
      const r = await qk(cmd, '--help');
      expect(r.code, cmd).toBe(0);
      expect(r.out).toContain(`qk ${cmd}`);
    }
  });

  it.runIf(!gpu)('verify without a GPU says so and reports every case as skipped, not passed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-verify-'));
    const r = await qk('verify', '--filter', 'rmsnorm', '--json', join(dir, 'v.json'));
    expect(r.code).toBe(0);
    expect(r.out).toContain('No usable GPU');
    expect(r.out).toContain('SKIPPED, not passed');
    const report = JSON.parse(readFileSync(join(dir, 'v.json'), 'utf8'));
    expect(report.passed).toBe(0);
    expect(report.failed).toBe(0);
    expect(report.skipped).toBeGreaterThan(0);
    expect(report.rows.every((row: { status: string }) => row.status === 'skipped')).toBe(true);
  });

  it('bench lists its suites and refuses bad combinations with the reason', async () => {
    const list = await qk('bench', 'list');
    expect(list.code).toBe(0);
    for (const suite of [
      'rmsnorm',
      'rope',
      'swiglu',
      'norm-linear',
      'attention',
      'linear-act',
      'quant',
      'small-m',
      'decode',
      'prefill',
      'patch',
    ])
      expect(list.out).toMatch(new RegExp(`^${suite} `, 'm'));
    const twoNames = await qk('bench', 'rope', 'swiglu', '--name', 'x');
    expect(twoNames.code).toBe(2);
    expect(twoNames.err).toContain('--name needs exactly one suite');
    expect((await qk('bench', 'render', join(tmpdir(), 'qk-no-such-report'))).err).toContain(
      'has no index.json',
    );
  });

  it('bench writes a valid report directory, keeps other reports in it, and re-renders it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-bench-'));
    const backend = gpu ? 'cuda' : 'cpu';
    const filter = gpu ? '1x128x' : '1x16x';
    const first = await qk('bench', 'rmsnorm', '--no-peers', '--filter', filter, '--report', dir);
    expect(first.code, first.err).toBe(0);
    if (!gpu) expect(first.err).toContain('running the CPU suites at small sizes');
    const second = await qk(
      'bench',
      'gemv',
      '--no-peers',
      '--name',
      'gemv-small',
      '--filter',
      'qkv',
      '--report',
      dir,
    );
    expect(second.code, second.err).toBe(0);
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'));
    expect(index.suites.map((s: { suite: string }) => s.suite)).toEqual(['rmsnorm', 'gemv-small']);
    const report = JSON.parse(readFileSync(join(dir, 'rmsnorm.json'), 'utf8'));
    expect(report.schema).toBe('qk.bench/2');
    expect(report.backend).toBe(backend);
    expect(report.rows).toHaveLength(1);
    expect(report.rows[0].timing.median).toBeGreaterThan(0);
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain(report.rows[0].label);
    const svg = readFileSync(join(dir, 'rmsnorm-bandwidth.svg'), 'utf8');
    const md = readFileSync(join(dir, 'rmsnorm.md'), 'utf8');
    const rendered = await qk('bench', 'render', dir);
    expect(rendered.code, rendered.err).toBe(0);
    expect(readFileSync(join(dir, 'rmsnorm-bandwidth.svg'), 'utf8')).toBe(svg);
    expect(readFileSync(join(dir, 'rmsnorm.md'), 'utf8')).toBe(md);
  });

  it.runIf(gpu)('verify passes on the GPU for the RMSNorm family', async () => {
    const r = await qk('verify', '--filter', 'rmsnorm');
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/\d+ passed, 0 failed, 0 skipped/);
  });
});
