/**
 * Downloading a Hugging Face model repository into the hub cache (see cache.ts), on Node's `fetch`: the file list
 * from `/api/models/{repo}/revision/{rev}?blobs=true`, each file from `/{repo}/resolve/{commit}/{file}` into
 * `blobs/<etag>.incomplete`, resumed with an HTTP Range request after an interruption, checked (sha256 for LFS
 * files, the git blob id for the others) and only then renamed into place and linked from the snapshot.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, statSync } from 'node:fs';
import { mkdir, readlink, rename, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { QkError } from '@qk/ops';
import {
  cachedSnapshot,
  defaultHubCacheDir,
  hubEndpoint,
  isCommitHash,
  isHubId,
  repoCacheDir,
} from './cache.js';

/** Why a hub operation failed; the message says what to do. */
export type HubFailure = 'auth' | 'not-found' | 'network' | 'checksum' | 'offline' | 'http' | 'invalid';

/** A model could not be fetched from (or found offline in the cache of) the Hugging Face hub. */
export class QkHubError extends QkError {
  readonly failure: HubFailure;
  constructor(failure: HubFailure, message: string) {
    super('QK_CHECKPOINT', message, 'hub');
    this.name = 'QkHubError';
    this.failure = failure;
  }
}

/** Progress of a pull, reported after each chunk. */
export interface PullProgress {
  /** The file being downloaded (repository path). */
  readonly file: string;
  /** Bytes of all files present so far, cached ones included. */
  readonly loadedBytes: number;
  /** Bytes of all files to be present at the end. */
  readonly totalBytes: number;
}

/** Options of {@link pullModel} and {@link resolveHubModel}. */
export interface PullOptions {
  /** Branch, tag or commit. Default `'main'`. */
  readonly revision?: string;
  /** The cache folder. Default {@link defaultHubCacheDir}: `HF_HUB_CACHE`, `HF_HOME/hub`, `~/.cache/huggingface/hub`. */
  readonly cacheDir?: string;
  /** Base URL of the hub. Default `HF_ENDPOINT`, else `https://huggingface.co`. */
  readonly endpoint?: string;
  /** Access token for gated or private repositories. Default `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`). */
  readonly token?: string;
  /** Which repository files to download. Default {@link defaultPullFilter}. */
  readonly include?: (file: string) => boolean;
  /** How many times an interrupted download resumes before giving up (the partial file stays). Default 3. */
  readonly retries?: number;
  readonly onProgress?: (progress: PullProgress) => void;
  readonly signal?: AbortSignal;
}

/** One file of a pulled snapshot. */
export interface PulledFile {
  readonly name: string;
  readonly size: number;
  /** True when the blob was already in the cache. */
  readonly cached: boolean;
}

/** What {@link pullModel} produced. */
export interface PullResult {
  readonly repo: string;
  readonly revision: string;
  readonly commit: string;
  /** The snapshot folder: a Qwen3 checkpoint directory for `loadQwen3`. */
  readonly dir: string;
  readonly files: readonly PulledFile[];
  /** Bytes transferred by this call. */
  readonly downloadedBytes: number;
}

/** Weights in formats qk does not read (PyTorch pickles, GGUF, ONNX, TF, Flax): skipped unless asked for. */
const OTHER_FORMATS = /\.(bin|pt|pth|ckpt|h5|msgpack|onnx|onnx_data|gguf|tflite|ot|pb)$/i;

/** Everything but weights in formats qk does not read. */
export function defaultPullFilter(file: string): boolean {
  return !OTHER_FORMATS.test(file) && !file.startsWith('original/') && !file.startsWith('onnx/');
}

interface Sibling {
  rfilename: string;
  size?: number;
  blobId?: string;
  lfs?: { sha256?: string; size?: number };
}

function describe(error: unknown): string {
  const e = error as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(error);
}

function authHeaders(token: string | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

function httpError(status: number, what: string, repo: string, hasToken: boolean): QkHubError {
  if (status === 401) {
    return new QkHubError(
      'auth',
      hasToken
        ? `${what}: the hub refused HF_TOKEN (401) for ${repo}; check that the token is valid (https://huggingface.co/settings/tokens).`
        : `${what}: the hub asks for authentication (401): ${repo} is gated, private or does not exist; check the name, and for a gated model accept its license on the model page and set HF_TOKEN to an access token.`,
    );
  }
  if (status === 403) {
    return new QkHubError(
      'auth',
      `${what}: access to ${repo} is forbidden (403); accept the model's license on its page with the account whose HF_TOKEN is set.`,
    );
  }
  if (status === 404) {
    return new QkHubError('not-found', `${what}: not found (404); check the repository name and --revision.`);
  }
  return new QkHubError('http', `${what}: the hub answered HTTP ${status}; try again later.`);
}

async function hubFetch(url: string, init: RequestInit, what: string): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw new QkHubError(
      'network',
      `${what}: cannot reach ${new URL(url).origin} (${describe(error)}); check the network (HF_ENDPOINT picks another hub or mirror), or copy the model directory here and pass its path.`,
    );
  }
}

/** Hashes a file: sha256, or the git blob id (sha1 over `blob <size>\0` + content). */
async function fileDigest(file: string, kind: 'sha256' | 'git'): Promise<string> {
  const hash = createHash(kind === 'sha256' ? 'sha256' : 'sha1');
  if (kind === 'git') hash.update(`blob ${statSync(file).size}\0`);
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function safeRelative(name: string, repo: string): string {
  const parts = name.split('/');
  if (name.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
    throw new QkHubError(
      'invalid',
      `${repo}: the hub listed a file with an unsafe name (${JSON.stringify(name)}).`,
    );
  }
  return path.join(...parts);
}

interface BlobJob {
  readonly url: string;
  readonly blob: string;
  readonly name: string;
  readonly size: number | undefined;
  readonly sha256: string | undefined;
  readonly gitOid: string | undefined;
}

/** Downloads one blob with resume; resolves to the bytes transferred. */
async function downloadBlob(
  job: BlobJob,
  headers: Record<string, string>,
  retries: number,
  onBytes: (n: number) => void,
  signal: AbortSignal | undefined,
  repo: string,
): Promise<number> {
  const partial = `${job.blob}.incomplete`;
  let transferred = 0;
  let sha256 = job.sha256;
  for (let attempt = 0; ; attempt++) {
    let have = existsSync(partial) ? statSync(partial).size : 0;
    if (job.size !== undefined && have > job.size) {
      await rm(partial, { force: true });
      have = 0;
    }
    if (job.size !== undefined && have === job.size && have > 0) break;
    const response = await hubFetch(
      job.url,
      {
        headers: { ...headers, ...(have > 0 ? { range: `bytes=${have}-` } : {}) },
        redirect: 'follow',
        signal,
      },
      `${repo}/${job.name}`,
    );
    if (response.status === 416 && have > 0) break; // nothing left to send: the partial file is whole
    if (!response.ok)
      throw httpError(response.status, `${repo}/${job.name}`, repo, 'authorization' in headers);
    const linked = response.headers.get('x-linked-etag')?.replace(/^W\//, '').replace(/"/g, '');
    if (sha256 === undefined && linked !== undefined && /^[0-9a-f]{64}$/.test(linked)) sha256 = linked;
    const resumed = response.status === 206;
    if (!resumed && have > 0) {
      onBytes(-have); // the server ignored the Range header: start again
      await truncate(partial, 0);
    }
    const out = createWriteStream(partial, { flags: resumed ? 'a' : 'w' });
    const closed = new Promise<void>((resolve, reject) => {
      out.on('close', resolve);
      out.on('error', reject);
    });
    try {
      if (response.body === null) throw new Error('empty response body');
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
        transferred += chunk.byteLength;
        onBytes(chunk.byteLength);
      }
      out.end();
      await closed;
      break;
    } catch (error) {
      out.end();
      await closed.catch(() => {});
      if (signal?.aborted) throw error;
      if (attempt >= retries) {
        const got = existsSync(partial) ? statSync(partial).size : 0;
        throw new QkHubError(
          'network',
          `${repo}/${job.name}: the download was interrupted after ${got}${job.size === undefined ? '' : ` of ${job.size}`} bytes (${describe(error)}); run the same command again to resume from ${path.basename(partial)}.`,
        );
      }
    }
  }
  const size = statSync(partial).size;
  if (job.size !== undefined && size !== job.size) {
    await rm(partial, { force: true });
    throw new QkHubError(
      'checksum',
      `${repo}/${job.name}: received ${size} bytes, the hub lists ${job.size}; the partial file was deleted, run the command again.`,
    );
  }
  const expected = sha256 ?? job.gitOid;
  if (expected !== undefined) {
    const kind = sha256 !== undefined ? 'sha256' : 'git';
    const actual = await fileDigest(partial, kind);
    if (actual !== expected) {
      await rm(partial, { force: true });
      throw new QkHubError(
        'checksum',
        `${repo}/${job.name}: the downloaded file is corrupted (${kind === 'sha256' ? 'sha256' : 'git blob id'} ${actual}, expected ${expected}); it was deleted and not used, run the command again.`,
      );
    }
  }
  await rename(partial, job.blob);
  return transferred;
}

async function linkIntoSnapshot(snapshotFile: string, blob: string): Promise<void> {
  await mkdir(path.dirname(snapshotFile), { recursive: true });
  const target = path.relative(path.dirname(snapshotFile), blob);
  try {
    if ((await readlink(snapshotFile)) === target) return;
  } catch {
    // Not a link yet.
  }
  await rm(snapshotFile, { force: true });
  await symlink(target, snapshotFile);
}

/**
 * Downloads `repo` (e.g. `'Qwen/Qwen3-0.6B'`) at `revision` into the hub cache and resolves to its snapshot folder.
 * Files already in the cache are not downloaded again; an interrupted download resumes where it stopped; every
 * file is checked against the hub's checksum before use.
 *
 * @throws QkHubError (`failure` says why: auth, not-found, network, checksum, http, invalid).
 */
export async function pullModel(repo: string, options: PullOptions = {}): Promise<PullResult> {
  if (!isHubId(repo)) {
    throw new QkHubError(
      'invalid',
      `"${repo}" is not a hub repository id; write it as owner/name, e.g. Qwen/Qwen3-0.6B.`,
    );
  }
  const revision = options.revision ?? 'main';
  const cacheDir = path.resolve(options.cacheDir ?? defaultHubCacheDir());
  const endpoint = (options.endpoint ?? hubEndpoint()).replace(/\/+$/, '');
  const token = options.token ?? (process.env.HF_TOKEN || process.env.HUGGING_FACE_HUB_TOKEN || undefined);
  const headers = authHeaders(token);
  const include = options.include ?? defaultPullFilter;
  const retries = options.retries ?? 3;
  const { signal } = options;

  const infoUrl = `${endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
  const what = `${repo}@${revision}`;
  const response = await hubFetch(infoUrl, { headers, signal }, what);
  if (!response.ok) throw httpError(response.status, what, repo, token !== undefined);
  const info = (await response.json()) as { sha?: unknown; siblings?: Sibling[] };
  const commit = typeof info.sha === 'string' ? info.sha : undefined;
  if (commit === undefined || !isCommitHash(commit) || !Array.isArray(info.siblings)) {
    throw new QkHubError(
      'http',
      `${what}: the hub's answer has no commit id or file list; is ${endpoint} a Hugging Face hub?`,
    );
  }
  const files = info.siblings.filter((s) => typeof s?.rfilename === 'string' && include(s.rfilename));
  if (files.length === 0)
    throw new QkHubError('not-found', `${what}: the repository has no files to download.`);

  const repoDir = repoCacheDir(cacheDir, repo);
  const snapshot = path.join(repoDir, 'snapshots', commit);
  await mkdir(path.join(repoDir, 'blobs'), { recursive: true });
  const sizeOf = (s: Sibling) => s.lfs?.size ?? s.size;
  const totalBytes = files.reduce((sum, s) => sum + (sizeOf(s) ?? 0), 0);
  let loadedBytes = 0;
  let downloadedBytes = 0;
  const pulled: PulledFile[] = [];

  for (const sibling of files) {
    const name = sibling.rfilename;
    const relative = safeRelative(name, repo);
    const sha256 = sibling.lfs?.sha256;
    const gitOid = sha256 === undefined ? sibling.blobId : undefined;
    const etag = sha256 ?? gitOid;
    if (etag === undefined || !/^[0-9a-f]{40,64}$/.test(etag)) {
      throw new QkHubError(
        'http',
        `${what}: the hub lists ${name} without a checksum, so it cannot be verified.`,
      );
    }
    const blob = path.join(repoDir, 'blobs', etag);
    const size = sizeOf(sibling);
    const cached = existsSync(blob) && (size === undefined || statSync(blob).size === size);
    if (!cached) {
      const url = `${endpoint}/${repo}/resolve/${commit}/${name.split('/').map(encodeURIComponent).join('/')}`;
      const report = (n: number) => {
        loadedBytes += n;
        options.onProgress?.({ file: name, loadedBytes, totalBytes });
      };
      const partial = `${blob}.incomplete`;
      if (existsSync(partial)) report(statSync(partial).size);
      downloadedBytes += await downloadBlob(
        { url, blob, name, size, sha256, gitOid },
        headers,
        retries,
        report,
        signal,
        repo,
      );
    } else {
      loadedBytes += size ?? statSync(blob).size;
      options.onProgress?.({ file: name, loadedBytes, totalBytes });
    }
    await linkIntoSnapshot(path.join(snapshot, relative), blob);
    pulled.push({ name, size: size ?? statSync(blob).size, cached });
  }
  if (!isCommitHash(revision)) {
    await mkdir(path.join(repoDir, 'refs'), { recursive: true });
    await writeFile(path.join(repoDir, 'refs', revision), commit);
  }
  return { repo, revision, commit, dir: snapshot, files: pulled, downloadedBytes };
}

/**
 * The local checkpoint folder for a hub id: the cached snapshot when there is one (no network), else a
 * {@link pullModel} — unless `HF_HUB_OFFLINE=1`, which turns a cache miss into a {@link QkHubError} saying so.
 */
export async function resolveHubModel(repo: string, options: PullOptions = {}): Promise<string> {
  const revision = options.revision ?? 'main';
  const cacheDir = path.resolve(options.cacheDir ?? defaultHubCacheDir());
  const cached = cachedSnapshot(cacheDir, repo, revision);
  if (cached !== undefined) return cached;
  if (process.env.HF_HUB_OFFLINE === '1') {
    throw new QkHubError(
      'offline',
      `${repo}@${revision} is not in the hub cache ${cacheDir} and HF_HUB_OFFLINE=1 forbids downloading it; run \`qk pull ${repo}\` where the hub is reachable (then copy ${repoCacheDir(cacheDir, repo)} here), or pass a local checkpoint directory.`,
    );
  }
  return (await pullModel(repo, { ...options, revision, cacheDir })).dir;
}
