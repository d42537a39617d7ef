/**
 * `qk bench serve`: starts the server `qk serve` runs (serve/server.ts) in this process on 127.0.0.1, the model
 * loaded once, and hands it to @qk/bench's serving suite with what the suite cannot know by itself: how the server
 * counts a chat's prompt, a lone generation on the same model, forgetting the cached prefix, and memory readings.
 */
import { createServer } from 'node:net';
import { basename } from 'node:path';
import {
  type BenchBackend,
  type BenchReport,
  type MachineInfo,
  runServeSuite,
  type ServeTarget,
} from '@qk/bench';
import { cudaDeviceInfo, cudaMemoryStats, cudaStatus } from '@qk/ops';
import type { GenerationStats, Qwen3Model } from '@qk/qwen3';
import { intOption, UsageError } from '../args.js';
import { type ModelValues, openModel, withInterrupt } from '../model-options.js';
import { chatPromptIds } from '../serve/app.js';
import { type RunningServer, startServer } from '../serve/server.js';
import { startSoakClients } from '../serve/soak-clients.js';

/** The flags of `qk bench serve` beside the model's (values as parsed by `qk bench`). */
export interface BenchServeValues extends ModelValues {
  clients?: string;
  duration?: string;
  tokens?: string;
  lengths?: string;
  history?: string;
  runs?: string;
  port?: string;
  'leak-mib'?: string;
  engines?: string;
}

export const BENCH_SERVE_HELP = `  serve       qk serve under concurrent streaming clients (not part of all): requests, stream errors by kind,
              per-request decode tok/s beside a lone generation, time to first token, aggregate tok/s, GPU
              memory over the run, and prefix reuse (turn 3 of a long chat vs a cold prefill)

Serve suite options (qk bench serve):
  --clients N        concurrent clients (default 16)
  --duration S       seconds of the soak (default 120)
  --tokens N         max_tokens of every request (default 128; CPU 8)
  --lengths LIST     prompt lengths in words, cycled by every client (default 32,128,512,1024; CPU 8,32,64)
  --history N        words of history in the prefix-reuse chat (default 2000; CPU 256; 0 skips the test)
  --runs N           lone generations per prompt length and prefix-reuse runs (default 3)
  --port N           port of the in-process server (default 0: a free one)
  --leak-mib N       GPU memory growth after warm-up that fails the flatness bar (default 64)`;

function count(text: string | undefined, fallback: number, option: string, min = 1): number {
  const v = intOption(text, option) ?? fallback;
  if (v < min) throw new UsageError(`--${option} must be at least ${min}, got ${v}`);
  return v;
}

function lengthList(text: string | undefined, fallback: number[]): number[] {
  if (text === undefined) return fallback;
  const values = text.split(',').map((s) => Number(s.trim()));
  if (values.some((v) => !Number.isSafeInteger(v) || v < 1))
    throw new UsageError(`--lengths must be a comma-separated list of positive integers, got "${text}"`);
  return values;
}

/** The suite's settings from the flags, checked before the model loads. */
export function serveSettings(values: BenchServeValues, cpu: boolean) {
  const engines = values.engines?.split(',').filter((e) => e.trim() !== '');
  if (engines !== undefined && engines.length > 1)
    throw new UsageError(
      `qk bench serve measures one engine per run (the server holds one model); give --engine ${engines[0]} and run it again for the others`,
    );
  const port = intOption(values.port, 'port') ?? 0;
  if (port > 65535) throw new UsageError(`--port must be at most 65535, got ${port}`);
  return {
    engine: engines?.[0]?.trim() ?? values.engine ?? (cpu ? 'cpu' : undefined),
    clients: count(values.clients, 16, 'clients'),
    durationMs: 1000 * count(values.duration, 120, 'duration'),
    maxTokens: count(values.tokens, cpu ? 8 : 128, 'tokens', 2),
    promptLengths: lengthList(values.lengths, cpu ? [8, 32, 64] : [32, 128, 512, 1024]),
    historyTokens: count(values.history, cpu ? 256 : 2000, 'history', 0),
    runs: count(values.runs, 3, 'runs'),
    port,
    leakBytes: 2 ** 20 * count(values['leak-mib'], 64, 'leak-mib', 0),
  };
}

/** Memory as the machine reports it: the GPU's used memory and the allocator's counters when the model is on one. */
function memoryReader(model: Qwen3Model): ServeTarget['memory'] {
  const gpu = model.engine !== 'cpu' && cudaStatus().available;
  // Under `node --expose-gc` every sample first collects garbage: a tensor nobody disposed is then released by its
  // finalizer, so a drift that remains is memory still referenced (a leak), not collection lag.
  const collect = (globalThis as { gc?: () => void }).gc;
  return () => {
    collect?.();
    const rssBytes = process.memoryUsage.rss();
    if (!gpu) return { rssBytes };
    const device = cudaDeviceInfo();
    const stats = cudaMemoryStats();
    return {
      rssBytes,
      deviceUsedBytes: device.totalMemoryBytes - device.freeMemoryBytes,
      allocatedBytes: stats.allocatedBytes,
      reservedBytes: stats.reservedBytes,
    };
  };
}

const portInUse = (port: number) =>
  new UsageError(
    `port ${port} on 127.0.0.1 is in use: give another with --port N, or leave --port out to take a free one`,
  );

/** Fails before the model loads (minutes for a large one) when the port asked for is taken. */
async function checkPortFree(port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((done, fail) => {
    const probe = createServer();
    probe.once('error', (e: NodeJS.ErrnoException) => fail(e.code === 'EADDRINUSE' ? portInUse(port) : e));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done()));
  });
}

async function listen(
  model: Qwen3Model,
  port: number,
  clients: number,
  maxTokens: number,
): Promise<RunningServer> {
  try {
    return await startServer({
      model,
      modelId: basename(model.source),
      host: '127.0.0.1',
      port,
      maxBodyBytes: 1024 * 1024,
      maxPromptTokens: model.maxContext - 1,
      maxTokensLimit: model.maxContext,
      // Every client has one request in flight; the prefix test adds one more.
      maxQueue: clients + 1,
      defaults: { maxTokens, temperature: 0, enableThinking: false },
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') throw portInUse(port);
    throw e;
  }
}

/** The script node is running (dist/main.js, or a bundle's qk.mjs): what the clients' child process runs. */
function cliEntry(): string {
  const entry = process.argv[1];
  if (entry === undefined)
    throw new Error('qk bench serve: cannot tell which script is running (process.argv[1])');
  return entry;
}

/** Loads the model, serves it, runs the suite, and always stops the server and frees the model. */
export async function benchServe(
  values: BenchServeValues,
  backend: BenchBackend,
  machine: MachineInfo,
  log: (line: string) => void,
  name: string | undefined,
): Promise<BenchReport> {
  const settings = serveSettings(values, backend === 'cpu');
  // Room for the longest request: words are about a token each; the chat template and replies add the rest.
  const longest = Math.max(
    settings.historyTokens,
    ...settings.promptLengths.map((l) => l + settings.clients),
  );
  const needed = Math.ceil(1.5 * longest) + 4 * settings.maxTokens + 256;
  const modelValues: ModelValues = {
    ...values,
    ...(settings.engine === undefined ? {} : { engine: settings.engine }),
    'max-context': values['max-context'] ?? String(Math.max(4096, needed)),
  };
  await checkPortFree(settings.port);
  return withInterrupt(async (signal) => {
    const model = await openModel(modelValues, signal);
    // The server's generations record their stats on the way out; the suite's own go straight to the method.
    const chat = model.chat.bind(model);
    let served: GenerationStats[] = [];
    model.chat = (messages, options) => {
      const generation = chat(messages, options);
      generation.result.then(
        (r) => served.push(r.stats),
        () => {},
      );
      return generation;
    };
    try {
      const server = await listen(model, settings.port, settings.clients, settings.maxTokens);
      log(`serve: ${model.source} (${model.engine}, context ${model.maxContext}) on ${server.url}`);
      try {
        const target: ServeTarget = {
          url: server.url,
          model: basename(model.source),
          engine: model.engine,
          source: model.source,
          promptTokens: (messages) => chatPromptIds(model, messages, false, undefined).length,
          chat: async (messages, maxTokens) => {
            const generation = chat(messages, {
              maxTokens,
              temperature: 0,
              enableThinking: false,
              signal,
            });
            return (await generation.result).stats;
          },
          takeServedStats: () => {
            const taken = served;
            served = [];
            return taken;
          },
          forgetPrefix: () => model.forgetPrefix(),
          memory: memoryReader(model),
        };
        // The clients run in a child process (this CLI again), off the server's event loop.
        const clients = startSoakClients(
          {
            url: target.url,
            model: target.model,
            maxTokens: settings.maxTokens,
          },
          cliEntry(),
        );
        try {
          return await runServeSuite({
            backend,
            target,
            ...settings,
            signal,
            onProgress: log,
            machine,
            ...(name === undefined ? {} : { name }),
            send: (request, client) => clients.send(request, client),
            clientsRunIn: 'a child process of their own',
          });
        } finally {
          await clients.close();
        }
      } finally {
        await server.close();
      }
    } finally {
      model.dispose();
    }
  });
}
