/**
 * Hub ids and `pullModel` end to end against a local server that speaks the hub's download protocol
 * (test/support/fake-hub.ts): a tiny Qwen3 checkpoint is served, downloaded into the HF cache layout, interrupted and
 * resumed, refused when corrupted, refused with a clear error without a token, and then loaded and generated from.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/index.js';
import { PRESETS } from '../src/config.js';
import {
  cachedSnapshot,
  defaultHubCacheDir,
  isHubId,
  pullModel,
  QkHubError,
  repoCacheDir,
  resolveHubModel,
} from '../src/hub/index.js';
import { loadQwen3 } from '../src/model.js';
import { FakeHub, sha256 } from './support/fake-hub.js';

const REPO = 'test-org/tiny-qwen3';
let scratch: string;
let hub: FakeHub;
let served: string;

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'qk-hub-'));
  served = path.join(scratch, 'served');
  await writeRandomCheckpoint(served, PRESETS.tiny, { seed: 7 });
  hub = await FakeHub.start(REPO, served);
});

afterAll(async () => {
  await hub.close();
});

/** A fresh cache folder, and the hub's faults and log cleared. */
function freshCache(): string {
  hub.requests.length = 0;
  hub.cutAfter.clear();
  hub.corrupt.clear();
  hub.ignoreRange = false;
  hub.token = undefined;
  return mkdtempSync(path.join(scratch, 'cache-'));
}

async function failure(promise: Promise<unknown>): Promise<QkHubError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(QkHubError);
  return error as QkHubError;
}

const WEIGHTS = 'model.safetensors';

describe('hub ids and the cache folder', () => {
  it('owner/name is a hub id; paths, presets and traversal are not', () => {
    expect(isHubId('Qwen/Qwen3-0.6B')).toBe(true);
    expect(isHubId('test-org/tiny_qwen3.v2')).toBe(true);
    for (const no of ['tiny', '0.6b', './models/x', '/abs/dir', 'a/b/c', '../x', 'a/..', 'owner/', '/name'])
      expect(isHubId(no), no).toBe(false);
  });

  it('defaults to the huggingface_hub cache: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub', () => {
    expect(defaultHubCacheDir({ HF_HUB_CACHE: '/c', HF_HOME: '/h' })).toBe('/c');
    expect(defaultHubCacheDir({ HF_HOME: '/h' })).toBe('/h/hub');
    expect(defaultHubCacheDir({ XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(defaultHubCacheDir({})).toMatch(/\.cache[\\/]huggingface[\\/]hub$/);
  });
});

describe('pullModel against a local hub', () => {
  it('downloads into the HF cache layout, verifies, and a second pull transfers nothing', async () => {
    const cacheDir = freshCache();
    const progress: number[] = [];
    const result = await pullModel(REPO, {
      cacheDir,
      endpoint: hub.url,
      onProgress: (p) => progress.push(p.loadedBytes / p.totalBytes),
    });
    const repoDir = repoCacheDir(cacheDir, REPO);
    expect(repoDir).toBe(path.join(cacheDir, 'models--test-org--tiny-qwen3'));
    expect(result.commit).toBe(hub.commit);
    expect(result.dir).toBe(path.join(repoDir, 'snapshots', hub.commit));
    expect(readFileSync(path.join(repoDir, 'refs', 'main'), 'utf8')).toBe(hub.commit);
    for (const name of hub.files.keys()) {
      const link = path.join(result.dir, name);
      expect(lstatSync(link).isSymbolicLink(), name).toBe(true);
      expect(readlinkSync(link).startsWith(`..${path.sep}..${path.sep}blobs${path.sep}`)).toBe(true);
      expect(readFileSync(link).equals(hub.files.get(name)!), name).toBe(true);
    }
    // LFS files are stored under their sha256, as huggingface_hub does.
    expect(existsSync(path.join(repoDir, 'blobs', sha256(hub.files.get(WEIGHTS)!)))).toBe(true);
    expect(progress.at(-1)).toBe(1);
    expect(result.downloadedBytes).toBe([...hub.files.values()].reduce((s, b) => s + b.length, 0));

    hub.requests.length = 0;
    const again = await pullModel(REPO, { cacheDir, endpoint: hub.url });
    expect(again.downloadedBytes).toBe(0);
    expect(again.files.every((f) => f.cached)).toBe(true);
    expect(hub.requests.map((r) => r.path)).toEqual([`/api/models/${REPO}/revision/main`]);
  });

  it('an interrupted download leaves a .incomplete file that the next pull resumes with a Range request', async () => {
    const cacheDir = freshCache();
    const size = hub.files.get(WEIGHTS)!.length;
    const cut = Math.floor(size / 3);
    hub.cutAfter.set(WEIGHTS, cut);
    const error = await failure(pullModel(REPO, { cacheDir, endpoint: hub.url, retries: 0 }));
    expect(error.failure).toBe('network');
    expect(error.message).toMatch(/interrupted after \d+ of \d+ bytes.*run the same command again to resume/);
    const partial = path.join(
      repoCacheDir(cacheDir, REPO),
      'blobs',
      `${sha256(hub.files.get(WEIGHTS)!)}.incomplete`,
    );
    // What reached the disk before the connection dropped: at most what the server sent (bytes in flight when a
    // socket dies may never reach the reader), and the resume must start exactly there.
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(cut);
    expect(cachedSnapshot(cacheDir, REPO, 'main')).toBeUndefined();

    const result = await pullModel(REPO, { cacheDir, endpoint: hub.url, retries: 0 });
    const downloads = hub.downloads(WEIGHTS);
    expect(downloads.map((r) => r.range)).toEqual([undefined, `bytes=${kept}-`]);
    expect(existsSync(partial)).toBe(false);
    expect(readFileSync(path.join(result.dir, WEIGHTS)).equals(hub.files.get(WEIGHTS)!)).toBe(true);
  });

  it('resumes by itself within one pull (retries), and restarts cleanly when the server ignores Range', async () => {
    const cacheDir = freshCache();
    const size = hub.files.get(WEIGHTS)!.length;
    const half = Math.floor(size / 2);
    hub.cutAfter.set(WEIGHTS, half);
    const result = await pullModel(REPO, { cacheDir, endpoint: hub.url });
    const ranges = hub.downloads(WEIGHTS).map((r) => r.range);
    expect(ranges).toHaveLength(2);
    expect(ranges[0]).toBeUndefined();
    // The retry resumes where the first attempt's bytes ended (at most `half`: bytes in flight can be lost).
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? '')?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(half);
    expect(sha256(readFileSync(path.join(result.dir, WEIGHTS)))).toBe(sha256(hub.files.get(WEIGHTS)!));

    const other = freshCache();
    hub.cutAfter.set(WEIGHTS, 1000);
    hub.ignoreRange = true;
    const restarted = await pullModel(REPO, { cacheDir: other, endpoint: hub.url });
    expect(readFileSync(path.join(restarted.dir, WEIGHTS)).equals(hub.files.get(WEIGHTS)!)).toBe(true);
  });

  it('refuses a corrupted LFS file (sha256) and a corrupted small file (git blob id), keeping nothing of it', async () => {
    for (const name of [WEIGHTS, 'config.json']) {
      const cacheDir = freshCache();
      hub.corrupt.add(name);
      const error = await failure(pullModel(REPO, { cacheDir, endpoint: hub.url }));
      expect(error.failure).toBe('checksum');
      expect(error.message).toContain(`${REPO}/${name}: the downloaded file is corrupted`);
      const blobs = path.join(repoCacheDir(cacheDir, REPO), 'blobs');
      const { readdirSync } = await import('node:fs');
      expect(readdirSync(blobs).filter((f) => f.endsWith('.incomplete'))).toEqual([]);
      expect(existsSync(path.join(repoCacheDir(cacheDir, REPO), 'snapshots', hub.commit, name))).toBe(false);
      expect(cachedSnapshot(cacheDir, REPO, 'main')).toBeUndefined();
    }
  });

  it('a 401 without a token says to set HF_TOKEN; with HF_TOKEN the Authorization header is sent', async () => {
    const cacheDir = freshCache();
    hub.token = 'hf_secret';
    const saved = process.env.HF_TOKEN;
    delete process.env.HF_TOKEN;
    try {
      const error = await failure(pullModel(REPO, { cacheDir, endpoint: hub.url }));
      expect(error.failure).toBe('auth');
      expect(error.message).toMatch(/401.*gated, private or does not exist.*set HF_TOKEN/);
      const wrong = await failure(pullModel(REPO, { cacheDir, endpoint: hub.url, token: 'hf_wrong' }));
      expect(wrong.message).toMatch(/refused HF_TOKEN \(401\)/);
      process.env.HF_TOKEN = 'hf_secret';
      const result = await pullModel(REPO, { cacheDir, endpoint: hub.url });
      expect(existsSync(path.join(result.dir, 'config.json'))).toBe(true);
      expect(hub.requests.at(-1)?.authorization).toBe('Bearer hf_secret');
    } finally {
      if (saved === undefined) delete process.env.HF_TOKEN;
      else process.env.HF_TOKEN = saved;
    }
  });

  it('an unknown revision is a 404 naming --revision; an unreachable hub is a network error', async () => {
    const cacheDir = freshCache();
    const missing = await failure(
      pullModel(REPO, { cacheDir, endpoint: hub.url, revision: 'no-such-branch' }),
    );
    expect(missing.failure).toBe('not-found');
    expect(missing.message).toMatch(/no-such-branch.*--revision/);
    const down = await failure(pullModel(REPO, { cacheDir, endpoint: 'http://127.0.0.1:9' }));
    expect(down.failure).toBe('network');
    expect(down.message).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
  });

  it('refuses a file list with a path that escapes the snapshot', async () => {
    const evil = path.join(scratch, 'evil');
    mkdirSync(evil, { recursive: true });
    writeFileSync(path.join(evil, 'config.json'), '{}');
    const bad = await FakeHub.start('test-org/evil', evil);
    const files = bad.files as Map<string, Buffer>;
    files.set('../../outside.json', Buffer.from('{}'));
    try {
      const error = await failure(pullModel('test-org/evil', { cacheDir: freshCache(), endpoint: bad.url }));
      expect(error.failure).toBe('invalid');
    } finally {
      await bad.close();
    }
  });
});

describe('loadQwen3 with a hub id', () => {
  it('downloads on first use, then loads from the cache with no network, and generates', async () => {
    const cacheDir = freshCache();
    const hubOptions = { cacheDir, endpoint: hub.url };
    const model = await loadQwen3(REPO, { engine: 'cpu', hub: hubOptions });
    expect(model.source).toBe(path.join(repoCacheDir(cacheDir, REPO), 'snapshots', hub.commit));
    const first = await model.generate('Hello', { maxTokens: 3, temperature: 0 }).result;
    model.dispose();
    expect(first.ids).toHaveLength(3);

    hub.requests.length = 0;
    const saved = process.env.HF_HUB_OFFLINE;
    process.env.HF_HUB_OFFLINE = '1';
    try {
      const cached = await loadQwen3(REPO, {
        engine: 'cpu',
        hub: { cacheDir, endpoint: 'http://127.0.0.1:9' },
      });
      const second = await cached.generate('Hello', { maxTokens: 3, temperature: 0 }).result;
      cached.dispose();
      expect(second.ids).toEqual(first.ids);
      expect(hub.requests).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.HF_HUB_OFFLINE;
      else process.env.HF_HUB_OFFLINE = saved;
    }
  });

  it('offline with an empty cache: a clear error naming qk pull', async () => {
    const saved = process.env.HF_HUB_OFFLINE;
    process.env.HF_HUB_OFFLINE = '1';
    try {
      const error = await failure(resolveHubModel(REPO, { cacheDir: freshCache(), endpoint: hub.url }));
      expect(error.failure).toBe('offline');
      expect(error.message).toContain(`qk pull ${REPO}`);
      expect(hub.requests).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.HF_HUB_OFFLINE;
      else process.env.HF_HUB_OFFLINE = saved;
    }
  });

  it('a directory that happens to be called owner/name wins over the hub', async () => {
    const cwd = process.cwd();
    const base = mkdtempSync(path.join(scratch, 'cwd-'));
    await writeRandomCheckpoint(path.join(base, 'test-org', 'tiny-qwen3'), PRESETS.tiny, {
      tokenizerDir: false,
    });
    process.chdir(base);
    hub.requests.length = 0;
    try {
      const model = await loadQwen3(REPO, {
        engine: 'cpu',
        hub: { cacheDir: freshCache(), endpoint: hub.url },
      });
      expect(model.source).toBe(path.join(base, 'test-org', 'tiny-qwen3'));
      model.dispose();
      expect(hub.requests).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
  });
});
