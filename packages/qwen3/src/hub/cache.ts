/**
 * The Hugging Face hub cache layout (the one `huggingface_hub` in Python writes, so a model pulled by either is
 * found by both):
 *
 * ```
 * <cacheDir>/models--<owner>--<name>/
 *   refs/<revision>              the commit a branch or tag pointed at when last pulled
 *   blobs/<etag>                 file contents, named by sha256 (LFS files) or git blob id (small files)
 *   blobs/<etag>.incomplete      a download in progress (resumed with an HTTP Range request)
 *   snapshots/<commit>/<file>    relative symlinks into blobs/
 * ```
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

/** An `owner/name` repository id; what `loadQwen3` and `qk generate --model` treat as a hub id. */
const HUB_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** True for an `owner/name` hub id such as `Qwen/Qwen3-0.6B` (whether or not a directory has that name). */
export function isHubId(value: string): boolean {
  return HUB_ID.test(value) && !value.includes('..');
}

/** The default cache: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub` (as huggingface_hub). */
export function defaultHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return path.resolve(env.HF_HUB_CACHE);
  if (env.HF_HOME) return path.resolve(env.HF_HOME, 'hub');
  const xdg = env.XDG_CACHE_HOME ? path.resolve(env.XDG_CACHE_HOME) : path.join(homedir(), '.cache');
  return path.join(xdg, 'huggingface', 'hub');
}

/** The base URL of the hub: `HF_ENDPOINT` or `https://huggingface.co`, without a trailing slash. */
export function hubEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '');
}

/** Folder of one repository in the cache. */
export function repoCacheDir(cacheDir: string, repo: string): string {
  return path.join(cacheDir, `models--${repo.split('/').join('--')}`);
}

/** A full 40-hex commit id (a revision that needs no ref lookup). */
export function isCommitHash(revision: string): boolean {
  return /^[0-9a-f]{40}$/.test(revision);
}

/** The commit `revision` resolved to when last pulled (read from `refs/`), or `undefined`. */
export function cachedCommit(cacheDir: string, repo: string, revision: string): string | undefined {
  if (isCommitHash(revision)) return revision;
  try {
    const commit = readFileSync(path.join(repoCacheDir(cacheDir, repo), 'refs', revision), 'utf8').trim();
    return isCommitHash(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The snapshot folder of `repo@revision` when the cache holds a usable Qwen3 checkpoint there (`config.json` and at
 * least one `*.safetensors` whose links resolve), else `undefined`. Needs no network.
 */
export function cachedSnapshot(cacheDir: string, repo: string, revision: string): string | undefined {
  const commit = cachedCommit(cacheDir, repo, revision);
  if (commit === undefined) return undefined;
  const dir = path.join(repoCacheDir(cacheDir, repo), 'snapshots', commit);
  if (!existsSync(path.join(dir, 'config.json'))) return undefined;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return undefined;
  }
  const weights = names.filter((n) => n.endsWith('.safetensors'));
  if (weights.length === 0) return undefined;
  // existsSync follows the symlink: a blob deleted by hand makes the snapshot unusable.
  if (!weights.every((n) => existsSync(path.join(dir, n)) && statSync(path.join(dir, n)).size > 0))
    return undefined;
  // A sharded checkpoint must have every shard its index names before it counts as complete.
  const index = path.join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    try {
      const map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map?: Record<string, string> })
        .weight_map;
      for (const shard of new Set(Object.values(map ?? {})))
        if (!existsSync(path.join(dir, shard))) return undefined;
    } catch {
      return undefined;
    }
  }
  return dir;
}
