/**
 * `qk pull` and `qk generate --model OWNER/NAME`, in-process, against a minimal hub on 127.0.0.1 (the protocol's
 * faults — interruption, corruption, tokens — are covered by @qk/qwen3's test/hub.test.ts; this checks the
 * command: flags, output, exit codes, and that generate finds what pull stored).
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PRESETS, writeRandomCheckpoint } from '@qk/qwen3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { UsageError } from '../src/args.js';
import { generateCommand } from '../src/commands/generate.js';
import { pullCommand } from '../src/commands/pull.js';

const REPO = 'test-org/tiny-qwen3';
const COMMIT = 'c'.repeat(40);
let root: string;
let server: Server;
let endpoint: string;
let token: string | undefined;
const saved = { ...process.env };

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-pull-cli-'));
  const dir = join(root, 'served');
  await writeRandomCheckpoint(dir, PRESETS.tiny, { seed: 3 });
  const files = new Map(readdirSync(dir).map((n) => [n, readFileSync(join(dir, n))]));
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  server = createServer((req, res) => {
    if (token !== undefined && req.headers.authorization !== `Bearer ${token}`)
      return void res.writeHead(401).end();
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === `/api/models/${REPO}/revision/main`) {
      const siblings = [...files].map(([rfilename, b]) => ({
        rfilename,
        size: b.length,
        lfs: { sha256: sha(b), size: b.length },
      }));
      return void res.end(JSON.stringify({ sha: COMMIT, siblings }));
    }
    const file = files.get(path.slice(`/${REPO}/resolve/${COMMIT}/`.length));
    if (path.startsWith(`/${REPO}/resolve/${COMMIT}/`) && file) return void res.end(file);
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(root, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
  token = undefined;
  for (const k of ['HF_ENDPOINT', 'HF_HUB_CACHE', 'HF_HUB_OFFLINE', 'HF_TOKEN']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

async function run(command: (argv: string[]) => Promise<number>, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void out.push(args.join(' ')));
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out.push(String(chunk));
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    err.push(String(chunk));
    return true;
  });
  const code = await command(argv);
  vi.restoreAllMocks();
  return { code, out: out.join('\n'), err: err.join('') };
}

describe('qk pull', () => {
  it('downloads into --cache-dir, prints the snapshot, then generate --model OWNER/NAME runs offline', async () => {
    process.env.HF_ENDPOINT = endpoint;
    const cacheDir = join(root, 'cache');
    const pulled = await run(pullCommand, REPO, '--cache-dir', cacheDir);
    expect(pulled.code).toBe(0);
    const snapshot = join(cacheDir, 'models--test-org--tiny-qwen3', 'snapshots', COMMIT);
    expect(pulled.out).toContain(snapshot);
    expect(pulled.out).toContain(`qk generate --model ${REPO}`);
    expect(pulled.err).toMatch(/pulling test-org\/tiny-qwen3 100%/);

    process.env.HF_HUB_CACHE = cacheDir;
    process.env.HF_HUB_OFFLINE = '1';
    process.env.HF_ENDPOINT = 'http://127.0.0.1:9';
    const generated = await run(
      generateCommand,
      'Hello',
      '--model',
      REPO,
      '--engine',
      'cpu',
      '--max-tokens',
      '3',
    );
    expect(generated.code).toBe(0);
    expect(generated.err).toMatch(/3 tokens at/);
    expect(generated.err).not.toMatch(/random weights/);
  });

  it('needs one repository id', async () => {
    await expect(pullCommand([])).rejects.toBeInstanceOf(UsageError);
    await expect(pullCommand(['a/b', 'c/d'])).rejects.toBeInstanceOf(UsageError);
  });

  it('a gated repository without HF_TOKEN is a hub error saying to set it', async () => {
    process.env.HF_ENDPOINT = endpoint;
    delete process.env.HF_TOKEN;
    token = 'hf_x';
    await expect(run(pullCommand, REPO, '--cache-dir', join(root, 'gated'))).rejects.toThrow(/set HF_TOKEN/);
  });
});
