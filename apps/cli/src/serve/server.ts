/** Starts the API of app.ts on Node's HTTP server and stops it cleanly. */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createServeApp, type ServeAppOptions } from './app.js';
import { isLoopback } from './origin.js';

/** A running server. */
export interface RunningServer {
  /** `http://host:port`, the port the system picked when 0 was asked for. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting connections, ends open ones (their generations abort) and resolves when all are closed. */
  close(): Promise<void>;
}

/** Options of {@link startServer}: the app's, plus where to listen. */
export interface StartServerOptions extends ServeAppOptions {
  /** Interface to bind; default 127.0.0.1 (this machine only). */
  readonly host?: string;
  /** Port; 0 picks a free one. Default 8080. */
  readonly port?: number;
}

export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const app = createServeApp({ loopbackOnly: isLoopback(host), ...options });
  return new Promise((resolve, reject) => {
    const server = serve(
      { fetch: app.fetch, hostname: host, port: options.port ?? 8080 },
      (info: AddressInfo) => {
        server.off('error', reject);
        const shownHost = info.family === 'IPv6' ? `[${info.address}]` : info.address;
        resolve({
          url: `http://${shownHost}:${info.port}`,
          port: info.port,
          close: () =>
            new Promise<void>((done) => {
              server.close(() => done());
              // Streams and keep-alive connections would hold close() open; their clients see the connection end.
              if ('closeAllConnections' in server) server.closeAllConnections();
            }),
        });
      },
    );
    server.once('error', reject);
  });
}
