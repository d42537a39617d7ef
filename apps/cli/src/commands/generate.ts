import { type Generation, QkAbortError } from '@qk/qwen3';
import { intOption, parse, UsageError } from '../args.js';
import {
  formatStats,
  MODEL_OPTIONS,
  MODEL_OPTIONS_HELP,
  openModel,
  samplingOptions,
  withInterrupt,
} from '../model-options.js';

/** Help text of `qk generate`. */
export const GENERATE_HELP = `qk generate — continue a prompt with Qwen3, streaming the text

Usage: qk generate PROMPT [options]
       echo PROMPT | qk generate - [options]

Streams the generated text to stdout and prints stats to stderr (prompt tokens, prefill time, time to first
token, decode tokens/s). Ctrl-C stops the generation (exit 130).

Options:
  --chat             wrap PROMPT in the chat template as a user message (the reply is the assistant's)
  --json             print one JSON object at the end instead: text, ids, stats, engine, model
  --logprobs         with --json: also each token's log-probability under the model's own distribution
                     ("logprobs": [{ id, logprob, topLogprobs }], one per id)
  --top-logprobs N   with --json: also the N (0–20) most likely tokens at each step (implies --logprobs)
  -h, --help         this help

${MODEL_OPTIONS_HELP}`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  // A trailing newline is the shell's, not part of the prompt.
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** `qk generate`: resolves to the exit code (0, 1 for a qk error, 2 for usage, 130 when stopped by Ctrl-C). */
export async function generateCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...MODEL_OPTIONS,
      chat: { type: 'boolean' },
      json: { type: 'boolean' },
      logprobs: { type: 'boolean' },
      'top-logprobs': { type: 'string' },
    } as const,
    true,
  );
  if (values.help) {
    console.log(GENERATE_HELP);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0
        ? 'give a PROMPT (or - to read it from stdin)'
        : 'give the prompt as one argument (quote it)',
    );
  }
  if (values['no-think'] && !values.chat) throw new UsageError('--no-think only applies with --chat');
  if (values['parse-special'] && !values.chat)
    throw new UsageError(
      '--parse-special only applies with --chat (a plain prompt always reads special tokens)',
    );
  const topLogprobs = intOption(values['top-logprobs'], 'top-logprobs');
  if (topLogprobs !== undefined && topLogprobs > 20)
    throw new UsageError('--top-logprobs must be at most 20');
  const wantsLogprobs = values.logprobs === true || topLogprobs !== undefined;
  if (wantsLogprobs && !values.json) {
    throw new UsageError('--logprobs and --top-logprobs need --json (the JSON report carries them)');
  }
  const options = {
    ...samplingOptions(values),
    ...(wantsLogprobs ? { logprobs: true } : {}),
    ...(topLogprobs === undefined ? {} : { topLogprobs }),
  };
  const prompt = positionals[0] === '-' ? await readStdin() : positionals[0]!;
  return withInterrupt(async (signal) => {
    const model = await openModel(values, signal);
    try {
      const generation: Generation = values.chat
        ? model.chat([{ role: 'user', content: prompt }], {
            ...options,
            signal,
            enableThinking: !values['no-think'],
            parseSpecialTokens: values['parse-special'] === true,
          })
        : model.generate(prompt, { ...options, signal });
      if (!values.json) for await (const chunk of generation) process.stdout.write(chunk);
      const result = await generation.result;
      if (values.json) {
        const { text, ids, stats, logprobs } = result;
        const report = {
          model: model.source,
          engine: model.engine,
          randomWeights: model.randomWeights,
          text,
          ids,
          ...(logprobs === undefined ? {} : { logprobs }),
          stats,
        };
        process.stdout.write(`${JSON.stringify(report)}\n`);
      } else {
        if (process.stdout.isTTY) process.stdout.write('\n');
        process.stderr.write(`${formatStats(result.stats)}\n`);
      }
      return 0;
    } catch (e) {
      if (!(e instanceof QkAbortError)) throw e;
      process.stderr.write('\n[stopped]\n');
      return 130;
    } finally {
      model.dispose();
    }
  }).catch((e: unknown) => {
    // Ctrl-C while the weights load.
    if (!(e instanceof QkAbortError)) throw e;
    process.stderr.write('\n[stopped]\n');
    return 130;
  });
}
