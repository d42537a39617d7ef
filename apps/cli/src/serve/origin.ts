/**
 * Browsers may send requests to a local server from any web page the user opens. A page on another origin (or one
 * that rebinds its own DNS name to 127.0.0.1) must not be able to run generations or read replies: requests that
 * carry an `Origin` header are served only when that origin is this server's own page, or one the user allowed
 * (`--allow-origin`, which also answers CORS preflights). Clients outside browsers send no `Origin` and are not
 * affected.
 */
import type { MiddlewareHandler } from 'hono';
import { ApiError } from './errors.js';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether `host` (an interface to bind) is reachable from this machine only. */
export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || host.startsWith('127.');
}

function hostnameOf(hostHeader: string): string {
  return hostHeader.startsWith('[')
    ? hostHeader.slice(0, hostHeader.indexOf(']') + 1)
    : hostHeader.split(':')[0]!;
}

/**
 * The middleware. `allowed`: origins whose pages may call the API (`'*'`: any); `loopbackOnly`: the server listens
 * on a loopback interface, so its own page is only ever addressed by a loopback name.
 */
export function originGuard(allowed: readonly string[], loopbackOnly: boolean): MiddlewareHandler {
  const any = allowed.includes('*');
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin === undefined) return next();
    const host = c.req.header('host') ?? '';
    let sameOrigin = false;
    try {
      sameOrigin = new URL(origin).host === host && (!loopbackOnly || LOOPBACK_NAMES.has(hostnameOf(host)));
    } catch {
      // `Origin: null` (a sandboxed or file page) and other non-URLs are other origins.
    }
    if (sameOrigin) return next();
    if (!any && !allowed.includes(origin)) {
      throw new ApiError(
        403,
        `Requests from web pages at ${origin} are refused: only this server's own page may call it from a browser. Start qk serve with --allow-origin ${origin} to allow that page.`,
        'invalid_request_error',
        null,
        'origin_not_allowed',
      );
    }
    c.header('access-control-allow-origin', origin);
    c.header('vary', 'Origin');
    if (c.req.method === 'OPTIONS') {
      return c.body(null, 204, {
        'access-control-allow-methods': 'GET, POST, OPTIONS',
        'access-control-allow-headers':
          c.req.header('access-control-request-headers') ?? 'authorization, content-type',
        'access-control-max-age': '600',
      });
    }
    return next();
  };
}
