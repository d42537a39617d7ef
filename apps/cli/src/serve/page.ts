/**
 * The demo page (apps/demo's build) served at `/`: its few files are read once at start-up and served from memory,
 * so no request path ever reaches the file system.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

/**
 * Where the built page is: `dir` when given, else `demo/` beside the running script (a bundle), else the
 * workspace's apps/demo/dist (a checkout). Undefined when none holds an index.html.
 */
export function findPageDir(dir?: string): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates =
    dir !== undefined ? [resolve(dir)] : [join(here, 'demo'), resolve(here, '../../demo/dist')];
  return candidates.find((c) => existsSync(join(c, 'index.html')));
}

/** Routes serving the page's files (`/` is index.html). */
export function pageRoutes(dir: string): (app: Hono) => void {
  const files = new Map<string, { body: Uint8Array; type: string }>();
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const type = TYPES[extname(name)];
    if (type !== undefined && statSync(path).isFile())
      files.set(`/${name}`, { body: readFileSync(path), type });
  }
  return (app) => {
    for (const [path, file] of files) {
      const serve = () =>
        new Response(file.body, { headers: { 'content-type': file.type, 'cache-control': 'no-cache' } });
      app.get(path, serve);
      if (path === '/index.html') app.get('/', serve);
    }
  };
}
