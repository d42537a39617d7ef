/**
 * A local stand-in for the Hugging Face hub on 127.0.0.1 (these machines cannot reach the real one), speaking the
 * parts of its protocol that a download uses:
 * - `GET /api/models/{owner}/{name}/revision/{rev}?blobs=true` → `{ id, sha, siblings: [{ rfilename, size, blobId,
 *   lfs? }] }` (401 without the right token when one is required, 404 for an unknown repo or revision);
 * - `GET /{owner}/{name}/resolve/{rev}/{file}` → the bytes, with `etag`, `x-repo-commit`, and for LFS files
 *   `x-linked-etag` (the sha256) and a 302 to a `/cdn/` URL, as the hub does; `Range: bytes=N-` answers 206.
 * Faults for tests: cut a file's next download after N bytes, serve corrupted bytes, ignore Range.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface HubRequest {
  readonly method: string;
  readonly path: string;
  readonly range: string | undefined;
  readonly authorization: string | undefined;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const gitOid = (b: Buffer) =>
  createHash('sha1')
    .update(Buffer.concat([Buffer.from(`blob ${b.length}\0`), b]))
    .digest('hex');

export class FakeHub {
  readonly requests: HubRequest[] = [];
  /** Next download of the file sends only this many bytes, then the connection drops (once). */
  readonly cutAfter = new Map<string, number>();
  /** Files served with one byte flipped (every time). */
  readonly corrupt = new Set<string>();
  /** Serve 200 with the whole file even when asked for a range. */
  ignoreRange = false;
  /** When set, every request needs `Authorization: Bearer <token>`. */
  token: string | undefined;
  readonly commit: string;
  url = '';
  readonly #server: Server;

  private constructor(
    readonly repo: string,
    readonly files: ReadonlyMap<string, Buffer>,
    readonly lfs: ReadonlySet<string>,
  ) {
    this.commit = createHash('sha1')
      .update(`${repo}:${[...files.keys()].join(',')}`)
      .digest('hex');
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  /** Serves every file of `dir` as repository `repo`; `*.safetensors` and `tokenizer.json` are LFS files. */
  static async start(repo: string, dir: string): Promise<FakeHub> {
    const files = new Map<string, Buffer>();
    for (const name of readdirSync(dir)) {
      if (statSync(join(dir, name)).isFile()) files.set(name, readFileSync(join(dir, name)));
    }
    const lfs = new Set(
      [...files.keys()].filter((n) => n.endsWith('.safetensors') || n === 'tokenizer.json'),
    );
    const hub = new FakeHub(repo, files, lfs);
    await new Promise<void>((resolve) => hub.#server.listen(0, '127.0.0.1', resolve));
    hub.url = `http://127.0.0.1:${(hub.#server.address() as AddressInfo).port}`;
    return hub;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Requests for a file's bytes (the CDN URL for LFS files, `/resolve/` for the others). */
  downloads(name: string): HubRequest[] {
    const target = this.lfs.has(name)
      ? `/cdn/${sha256(this.files.get(name)!)}`
      : `/${this.repo}/resolve/${this.commit}/${name}`;
    return this.requests.filter((r) => r.path === target);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      range: req.headers.range,
      authorization: req.headers.authorization,
    });
    if (this.token !== undefined && req.headers.authorization !== `Bearer ${this.token}`) {
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end('{"error":"Invalid credentials in Authorization header"}');
      return;
    }
    const api = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/);
    if (api) {
      this.#info(res, api[1]!, decodeURIComponent(api[2]!));
      return;
    }
    const cdn = url.pathname.match(/^\/cdn\/([0-9a-f]{64})$/);
    if (cdn) {
      const name = [...this.lfs].find((n) => sha256(this.files.get(n)!) === cdn[1]);
      if (name === undefined) res.writeHead(404).end();
      else this.#send(req, res, name);
      return;
    }
    const prefix = `/${this.repo}/resolve/`;
    if (url.pathname.startsWith(prefix)) {
      const [rev, ...rest] = url.pathname.slice(prefix.length).split('/');
      const name = rest.map(decodeURIComponent).join('/');
      if ((rev !== this.commit && rev !== 'main') || !this.files.has(name)) {
        res.writeHead(404).end();
        return;
      }
      if (this.lfs.has(name)) {
        const sha = sha256(this.files.get(name)!);
        res.writeHead(302, {
          location: `/cdn/${sha}`,
          'x-linked-etag': `"${sha}"`,
          'x-repo-commit': this.commit,
        });
        res.end();
        return;
      }
      this.#send(req, res, name);
      return;
    }
    res.writeHead(404).end();
  }

  #info(res: ServerResponse, repo: string, revision: string): void {
    if (repo !== this.repo) {
      res.writeHead(this.token === undefined ? 401 : 404).end('{"error":"Repository not found"}');
      return;
    }
    if (revision !== 'main' && revision !== this.commit) {
      res.writeHead(404).end('{"error":"Invalid rev id"}');
      return;
    }
    const siblings = [...this.files].map(([rfilename, bytes]) => ({
      rfilename,
      size: bytes.length,
      blobId: gitOid(bytes),
      ...(this.lfs.has(rfilename)
        ? { lfs: { sha256: sha256(bytes), size: bytes.length, pointerSize: 134 } }
        : {}),
    }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: this.repo, sha: this.commit, siblings }));
  }

  #send(req: IncomingMessage, res: ServerResponse, name: string): void {
    let bytes = this.files.get(name)!;
    const etag = this.lfs.has(name) ? sha256(bytes) : gitOid(bytes);
    if (this.corrupt.has(name)) {
      bytes = Buffer.from(bytes);
      bytes[bytes.length >> 1]! ^= 0xff;
    }
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m && !this.ignoreRange ? Number(m[1]) : 0;
    if (start >= bytes.length && start > 0) {
      res.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
      return;
    }
    const body = bytes.subarray(start);
    res.writeHead(start > 0 ? 206 : 200, {
      'content-length': String(body.length),
      etag: `"${etag}"`,
      'x-repo-commit': this.commit,
      'accept-ranges': 'bytes',
      ...(start > 0 ? { 'content-range': `bytes ${start}-${bytes.length - 1}/${bytes.length}` } : {}),
    });
    const cut = this.cutAfter.get(name);
    if (cut !== undefined) {
      this.cutAfter.delete(name);
      res.write(body.subarray(0, cut), () => res.destroy());
      return;
    }
    res.end(body);
  }
}

export { gitOid, sha256 };
