/**
 * The clients of `qk bench serve` in a child process. In the server's own process, 16 clients reading their streams
 * (fetch, SSE parsing, JSON, the stream checks) share one event loop with the server's decode loop and its HTTP
 * writes, so the per-request speed the soak reports would include the clients' work. The child is this same CLI
 * run with a hidden command: it reads one job per line on stdin (a request to send), sends them concurrently with
 * @qk/bench's `sendChatStream`, and writes one line per finished request on stdout.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { type RequestRecord, type SoakOptions, type SoakRequest, sendChatStream } from '@qk/bench';

/** The hidden command that runs the clients (not in the help: only `qk bench serve` starts it). */
export const SOAK_CLIENTS_COMMAND = '__soak-clients';

type Target = Pick<SoakOptions, 'url' | 'model' | 'apiKey' | 'maxTokens'>;

interface Job {
  readonly id: number;
  readonly client: number;
  readonly request: SoakRequest;
  readonly target: Target;
}

interface Reply {
  readonly id: number;
  readonly record: RequestRecord;
}

/** The child: every job line becomes one streaming request, all in flight at once; ends when stdin closes. */
export async function soakClientsCommand(): Promise<number> {
  const inFlight = new Set<Promise<void>>();
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY })) {
    if (line.trim() === '') continue;
    const job = JSON.parse(line) as Job;
    const run = sendChatStream(job.target, job.request, job.client).then((record) => {
      process.stdout.write(`${JSON.stringify({ id: job.id, record } satisfies Reply)}\n`);
    });
    inFlight.add(run);
    void run.finally(() => inFlight.delete(run));
  }
  await Promise.all(inFlight);
  return 0;
}

/** The parent's handle on the child: runSoak's `send`, and `close` once the soak is over. */
export interface SoakClients {
  send(request: SoakRequest, client: number): Promise<RequestRecord>;
  close(): Promise<void>;
}

/**
 * Starts the child (`node <this CLI> __soak-clients`). Its records keep their own durations (time to first token,
 * decode rate, latency, all measured in the child); `endedAt` is taken again on arrival, on this process's clock.
 * If the child dies, every request still waiting gets a record with an `http` error instead of hanging the soak.
 */
export function startSoakClients(target: Target, entry: string): SoakClients {
  const child = spawn(process.execPath, [entry, SOAK_CLIENTS_COMMAND], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting = new Map<number, { client: number; key: string; done: (record: RequestRecord) => void }>();
  let nextId = 0;
  let ended: string | undefined;
  const failed = (client: number, key: string): RequestRecord => ({
    client,
    key,
    outcome: { errors: [{ kind: 'http', message: `the soak's client process ended: ${ended}` }], text: '' },
    latencyMs: 0,
    endedAt: performance.now(),
  });
  const settleAll = (why: string) => {
    ended ??= why;
    for (const [id, job] of waiting) {
      waiting.delete(id);
      job.done(failed(job.client, job.key));
    }
  };
  createInterface({ input: child.stdout!, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
    let reply: Reply;
    try {
      reply = JSON.parse(line) as Reply;
    } catch {
      return; // not one of the child's record lines
    }
    const job = waiting.get(reply?.id);
    if (job === undefined) return;
    waiting.delete(reply.id);
    job.done({ ...reply.record, endedAt: performance.now() });
  });
  child.on('error', (e) => settleAll(e.message));
  child.on('exit', (code, signal) => settleAll(signal === null ? `exit code ${code}` : `signal ${signal}`));
  child.stdin!.on('error', () => {}); // a child that died is reported through 'exit'
  return {
    send(request, client) {
      if (ended !== undefined) return Promise.resolve(failed(client, request.key));
      const id = nextId++;
      return new Promise<RequestRecord>((done) => {
        waiting.set(id, { client, key: request.key, done });
        child.stdin!.write(`${JSON.stringify({ id, client, request, target } satisfies Job)}\n`);
      });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((done) => child.once('exit', () => done()));
      child.stdin!.end();
      // Streams the soak cut are aborted on the server's side; give the child a moment, then stop it.
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
