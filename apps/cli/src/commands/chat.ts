import { createInterface } from 'node:readline';
import {
  type ChatMessage,
  type GenerateOptions,
  QkAbortError,
  QkContextError,
  type Qwen3Model,
} from '@qk/qwen3';
import { parse, shownValue, UsageError } from '../args.js';
import {
  formatStats,
  MODEL_OPTIONS,
  MODEL_OPTIONS_HELP,
  openModel,
  samplingOptions,
  withInterrupt,
} from '../model-options.js';

/** Help text of `qk chat`. */
export const CHAT_HELP = `qk chat — an interactive chat with Qwen3

Usage: qk chat [options]

Type a message and press Enter; the reply streams back, with its stats on stderr. The history is kept (and
sent whole each turn) until /reset. /exit or Ctrl-D leaves. Ctrl-C stops the reply being written and returns to
the prompt; Ctrl-C at an empty prompt leaves. With piped stdin each line is one message, answered in turn.

Options:
  --system TEXT      a system message at the start of the history (kept across /reset)
  -h, --help         this help

${MODEL_OPTIONS_HELP}`;

const COMMANDS_HINT = 'commands: /reset (clear the history), /exit (leave)';

/** `qk chat`: resolves to the exit code (0 when the user leaves, 130 when loading was stopped by Ctrl-C). */
export async function chatCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...MODEL_OPTIONS, system: { type: 'string' } } as const,
    true,
  );
  if (values.help) {
    console.log(CHAT_HELP);
    return 0;
  }
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument ${shownValue(positionals[0])}; type messages after it starts`);
  const options = samplingOptions(values);
  const model = await withInterrupt((signal) => openModel(values, signal)).catch((e: unknown) => {
    if (e instanceof QkAbortError) return undefined;
    throw e;
  });
  if (model === undefined) return 130;
  try {
    const system: ChatMessage[] =
      values.system === undefined ? [] : [{ role: 'system', content: values.system }];
    await converse(model, system, {
      ...options,
      enableThinking: !values['no-think'],
      parseSpecialTokens: values['parse-special'] === true,
    });
    return 0;
  } finally {
    model.dispose();
  }
}

async function converse(
  model: Qwen3Model,
  system: readonly ChatMessage[],
  options: GenerateOptions & { enableThinking: boolean; parseSpecialTokens: boolean },
): Promise<void> {
  const interactive = Boolean(process.stdin.isTTY && process.stdout.isTTY);
  const rl = createInterface({
    input: process.stdin,
    ...(interactive ? { output: process.stdout, prompt: '> ' } : {}),
    terminal: interactive,
  });
  let history: ChatMessage[] = [...system];
  let reply: AbortController | undefined;
  rl.on('SIGINT', () => {
    if (reply !== undefined) reply.abort(new Error('stopped with Ctrl-C'));
    else if (rl.line.length > 0) {
      // As in a shell: Ctrl-C discards the half-typed line.
      process.stdout.write('^C\n');
      rl.write(null, { ctrl: true, name: 'u' });
      rl.prompt();
    } else rl.close();
  });
  if (interactive) {
    process.stderr.write(
      `chatting with ${model.source} on the ${model.engine} engine; ${COMMANDS_HINT}; Ctrl-C stops a reply\n`,
    );
    rl.prompt();
  }
  // An error must still close readline, or its hold on stdin would keep the process alive.
  try {
    for await (const line of rl) {
      const text = line.trim();
      if (text === '/exit') break;
      if (text === '/reset') {
        history = [...system];
        process.stderr.write('(history cleared)\n');
      } else if (text.startsWith('/')) {
        process.stderr.write(`unknown command ${text}; ${COMMANDS_HINT}\n`);
      } else if (text !== '') {
        history.push({ role: 'user', content: line });
        reply = new AbortController();
        const answer = await answerOne(model, history, { ...options, signal: reply.signal });
        reply = undefined;
        if (answer === undefined) history.pop();
        else if (answer.length > 0) history.push({ role: 'assistant', content: answer });
      }
      if (interactive) rl.prompt();
    }
  } finally {
    rl.close();
  }
  if (interactive) process.stdout.write('\n');
}

/**
 * Streams one reply and returns its text (partial when stopped with Ctrl-C, so the history shows what the user
 * saw), or `undefined` when the conversation no longer fits the context and this turn is dropped.
 */
async function answerOne(
  model: Qwen3Model,
  history: readonly ChatMessage[],
  options: GenerateOptions & { enableThinking: boolean; parseSpecialTokens: boolean },
): Promise<string | undefined> {
  let text = '';
  try {
    const generation = model.chat(history, options);
    for await (const chunk of generation) {
      process.stdout.write(chunk);
      text += chunk;
    }
    process.stdout.write('\n');
    process.stderr.write(`[${formatStats((await generation.result).stats)}]\n`);
    return text;
  } catch (e) {
    if (e instanceof QkAbortError) {
      process.stdout.write('\n');
      process.stderr.write('[stopped]\n');
      return text;
    }
    if (e instanceof QkContextError) {
      process.stderr.write(
        `${e.message.replace(/^generate: /, '')}\nType /reset to start a new conversation.\n`,
      );
      return undefined;
    }
    throw e;
  }
}
