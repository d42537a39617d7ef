import { existsSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { isPresetName, QkAbortError, type Qwen3Model } from '@qk/qwen3';
import { intOption, parse, shownValue, UsageError } from '../args.js';
import {
  MODEL_OPTIONS,
  MODEL_OPTIONS_HELP,
  openModel,
  samplingOptions,
  withInterrupt,
} from '../model-options.js';
import { findPageDir, pageRoutes } from '../serve/page.js';
import { startServer } from '../serve/server.js';

/** Help text of `qk serve`. */
export const SERVE_HELP = `qk serve — an OpenAI-compatible HTTP server over one Qwen3 model, loaded once

Usage: qk serve [options]

Routes (point the openai client, the Vercel AI SDK or Open WebUI at http://HOST:PORT/v1):
  POST /v1/chat/completions   chat, streamed (SSE, "stream": true) or not; Qwen3's thinking comes apart as
                              reasoning_content; "enable_thinking": false (or chat_template_kwargs) turns it off
  POST /v1/completions        continue a prompt (text or token ids)
  GET  /v1/models             the one model served
  GET  /health                status, engine and queue length
  GET  /                      the demo chat page (apps/demo), where it is built
Requests take turns on the model in arrival order; a client that disconnects cancels its generation. A chat's next
turn reuses the cached prefix of the conversation and prefills only the new tokens. Ctrl-C stops the server.

Server:
  --port N               port to listen on (default 8080; 0 picks a free one)
  --host ADDR            interface to bind (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)
  --api-key KEY          require "Authorization: Bearer KEY" on every route (default: no key)
  --allow-origin ORIGIN  let web pages at ORIGIN (e.g. http://localhost:3000, or * for any) call the API from a
                         browser, with CORS; repeatable (default: only the server's own page)
  --name ID              the model id clients send and /v1/models lists (default: the preset as qwen3-NAME,
                         the directory's name, or the hub id)
  --max-body-bytes N     largest request body (default 1048576; 413 above)
  --max-prompt-tokens N  longest prompt, chat template included (default: the context less one; 400 above)
  --max-tokens-limit N   largest max_tokens a request may ask for (default: the context; 400 above)
  --max-queue N          most requests running or waiting at once (default 64; 429 above)
  --demo DIR             serve the chat page from DIR (default: the built apps/demo, when there is one)
  -h, --help             this help

The sampling flags below are the defaults for requests that leave a field out (--max-tokens default: the
--max-tokens-limit; --no-think: enable_thinking false).

${MODEL_OPTIONS_HELP}`;

const SERVE_OPTIONS = {
  ...MODEL_OPTIONS,
  port: { type: 'string' },
  host: { type: 'string' },
  'api-key': { type: 'string' },
  name: { type: 'string' },
  'max-body-bytes': { type: 'string' },
  'max-prompt-tokens': { type: 'string' },
  'max-tokens-limit': { type: 'string' },
  'max-queue': { type: 'string' },
  demo: { type: 'string' },
  'allow-origin': { type: 'string', multiple: true },
} as const;

function positive(value: string | undefined, name: string): number | undefined {
  const n = intOption(value, name);
  if (n === 0) throw new UsageError(`--${name} must be at least 1`);
  return n;
}

/** The id clients name: the flag, else the preset, directory name or hub id the model came from. */
function modelId(name: string | undefined, given: string | undefined, model: Qwen3Model): string {
  if (name !== undefined) return name;
  if (given === undefined || isPresetName(given)) return `qwen3-${given ?? model.source}`;
  return existsSync(given) ? basename(resolve(given)) : given;
}

/** `qk serve`: runs until Ctrl-C or SIGTERM; resolves to the exit code. */
export async function serveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, SERVE_OPTIONS, true);
  if (values.help) {
    console.log(SERVE_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${shownValue(positionals[0])}`);
  const port = intOption(values.port, 'port') ?? 8080;
  if (port > 65535) throw new UsageError(`--port must be at most 65535, got ${port}`);
  if (values['api-key'] !== undefined && values['api-key'].length === 0)
    throw new UsageError('--api-key must not be empty');
  if (values.name !== undefined && values.name.length === 0) throw new UsageError('--name must not be empty');
  const maxBodyBytes = positive(values['max-body-bytes'], 'max-body-bytes') ?? 1024 * 1024;
  const maxPromptTokens = positive(values['max-prompt-tokens'], 'max-prompt-tokens');
  const maxTokensLimit = positive(values['max-tokens-limit'], 'max-tokens-limit');
  const maxQueue = positive(values['max-queue'], 'max-queue') ?? 64;
  const sampling = samplingOptions(values);
  const pageDir = findPageDir(values.demo);
  if (values.demo !== undefined && pageDir === undefined)
    throw new UsageError(
      `--demo ${shownValue(values.demo)} holds no index.html (build it: pnpm --filter @qk/demo build)`,
    );
  const model = await withInterrupt((signal) => openModel(values, signal)).catch((e: unknown) => {
    if (e instanceof QkAbortError) return undefined;
    throw e;
  });
  if (model === undefined) return 130;
  try {
    const limit = Math.min(maxTokensLimit ?? model.maxContext, model.maxContext);
    const id = modelId(values.name, values.model ?? values.preset, model);
    const server = await startServer({
      model,
      modelId: id,
      ...(values['api-key'] === undefined ? {} : { apiKey: values['api-key'] }),
      host: values.host ?? '127.0.0.1',
      port,
      maxBodyBytes,
      maxPromptTokens: maxPromptTokens ?? model.maxContext - 1,
      maxTokensLimit: limit,
      maxQueue,
      defaults: {
        ...sampling,
        maxTokens: Math.min(sampling.maxTokens ?? limit, limit),
        enableThinking: !values['no-think'],
      },
      ...(pageDir === undefined ? {} : { extraRoutes: pageRoutes(pageDir) }),
      allowedOrigins: values['allow-origin'] ?? [],
      log: (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`),
    });
    if (pageDir !== undefined) process.stderr.write(`qk serve: chat page on ${server.url}/\n`);
    process.stderr.write(
      `qk serve: ${id} (${model.engine}, context ${model.maxContext}) on ${server.url}/v1${values['api-key'] === undefined ? '' : ' (API key required)'}; Ctrl-C stops\n`,
    );
    await withInterrupt(
      (signal) => new Promise<void>((done) => signal.addEventListener('abort', () => done(), { once: true })),
    );
    process.stderr.write('qk serve: stopping\n');
    await server.close();
    return 0;
  } finally {
    model.dispose();
  }
}
