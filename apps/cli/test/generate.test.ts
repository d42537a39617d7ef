/** `qk generate` on the tiny preset and the cpu engine, run as a child process. */
import { cudaAvailable } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { qk } from './run-qk.js';

const tiny = ['--preset', 'tiny', '--engine', 'cpu'];
const prompt = `Count: ${Math.floor(Math.random() * 1000)}, ${Math.floor(Math.random() * 1000)},`;

async function json(args: readonly string[], input?: string) {
  const r = await qk(['generate', ...args, '--json'], input);
  expect(r.code, r.err).toBe(0);
  return { report: JSON.parse(r.out), err: r.err };
}

describe('qk generate', () => {
  it('--json prints one object with the text, ids, stats, engine and model', async () => {
    const { report, err } = await json([prompt, ...tiny, '--max-tokens', '6', '--temperature', '0']);
    expect(report).toMatchObject({ model: 'tiny', engine: 'cpu', randomWeights: true });
    expect(report.ids.length).toBeLessThanOrEqual(6);
    expect(report.stats.maxTokens).toBe(6);
    expect(report.stats.promptTokens).toBeGreaterThan(3);
    expect(['length', 'stop']).toContain(report.stats.finishReason);
    expect(typeof report.text).toBe('string');
    // The random-weights notice comes once, with the way out.
    expect(err.match(/meaningless/g)).toHaveLength(1);
    expect(err).toContain('--model DIR');
  });

  it('streams the same text to stdout, with stats and load progress on stderr', async () => {
    const args = [prompt, ...tiny, '--max-tokens', '5', '--seed', '7'];
    const { report } = await json(args);
    const streamed = await qk(['generate', ...args]);
    expect(streamed.code, streamed.err).toBe(0);
    expect(streamed.out).toBe(report.text);
    expect(streamed.err).toMatch(
      /prompt \d+ tokens · prefill [\d.]+ ms · TTFT [\d.]+ ms · \d+ tokens at [\d.]+ tok\/s/,
    );
    // Not a terminal: a few plain progress lines, not carriage-return redraws.
    expect(streamed.err).toContain('loading tiny (cpu) 100%');
    expect(streamed.err).not.toContain('\r');
  });

  it('reads the prompt from stdin with -', async () => {
    const fromArg = (await json([prompt, ...tiny, '--max-tokens', '4', '--temperature', '0'])).report;
    const fromStdin = (await json(['-', ...tiny, '--max-tokens', '4', '--temperature', '0'], `${prompt}\n`))
      .report;
    expect(fromStdin.ids).toEqual(fromArg.ids);
    expect(fromStdin.stats.promptTokens).toBe(fromArg.stats.promptTokens);
  });

  it('--chat wraps the prompt in the chat template; --no-think adds the empty think block', async () => {
    const plain = (await json([prompt, ...tiny, '--max-tokens', '1'])).report;
    const chat = (await json([prompt, ...tiny, '--max-tokens', '1', '--chat'])).report;
    const noThink = (await json([prompt, ...tiny, '--max-tokens', '1', '--chat', '--no-think'])).report;
    expect(chat.stats.promptTokens).toBeGreaterThan(plain.stats.promptTokens);
    expect(noThink.stats.promptTokens).toBeGreaterThan(chat.stats.promptTokens);
  });

  it('clamps to --max-context and says so in the finish reason', async () => {
    const { report } = await json([
      'a b c d e',
      ...tiny,
      '--max-context',
      '8',
      '--max-tokens',
      '50',
      '--temperature',
      '0',
    ]);
    expect(report.stats.maxTokens).toBe(8 - report.stats.promptTokens);
    if (report.stats.finishReason !== 'stop') expect(report.stats.finishReason).toBe('context');
  });

  it.runIf(!cudaAvailable())(
    'without --model or a GPU it runs the tiny preset on the cpu engine',
    async () => {
      const { report } = await json(['Hi', '--max-tokens', '1']);
      expect(report).toMatchObject({ model: 'tiny', engine: 'cpu' });
    },
  );

  it('applies the sampling controls and reports log-probabilities with --json', async () => {
    // Two tokens biased far above every other (random logits of the tiny preset stay within a few units).
    const [a, b] = [1000 + Math.floor(Math.random() * 5000), 9000 + Math.floor(Math.random() * 5000)];
    const { report } = await json([
      prompt,
      ...tiny,
      '--max-tokens',
      '4',
      '--temperature',
      '0',
      '--logit-bias',
      `${a}=100,${b}=99.9`,
      '--presence-penalty',
      '2',
      '--top-logprobs',
      '3',
    ]);
    expect(report.ids).toHaveLength(4);
    for (const id of report.ids) expect([a, b]).toContain(id);
    expect(report.logprobs).toHaveLength(report.ids.length);
    for (const [i, lp] of report.logprobs.entries()) {
      expect(lp.id).toBe(report.ids[i]);
      expect(lp.logprob).toBeLessThan(0);
      expect(lp.topLogprobs).toHaveLength(3);
      expect(lp.topLogprobs[0].logprob).toBeGreaterThanOrEqual(lp.topLogprobs[2].logprob);
    }
    const plain = await json([prompt, ...tiny, '--max-tokens', '2', '--temperature', '0']);
    expect(plain.report.logprobs).toBeUndefined();
  });

  it('usage mistakes exit 2 with a pointer to help; model errors exit 1 with a sentence', async () => {
    const usage: [string[], RegExp][] = [
      [[], /give a PROMPT/],
      [['a', 'b'], /one argument/],
      [['x', '--temperature', 'hot'], /--temperature must be a number/],
      [['x', '--top-p', '0'], /--top-p/],
      [['x', '--max-tokens', '0'], /--max-tokens/],
      [['x', '--preset', 'huge'], /unknown preset "huge"/],
      [['x', '--engine', 'turbo'], /--engine must be/],
      [['x', '--model', '/tmp', '--preset', 'tiny'], /not both/],
      [['x', '--no-think'], /only applies with --chat/],
      [['x', '--presence-penalty', '2.5'], /--presence-penalty must be a number in \[-2, 2\]/],
      [['x', '--frequency-penalty', 'lots'], /--frequency-penalty/],
      [['x', '--repetition-penalty', '0'], /--repetition-penalty must be a number > 0/],
      [['x', '--min-p', '1.5'], /--min-p/],
      [['x', '--logit-bias', '12:5'], /--logit-bias takes ID=BIAS pairs/],
      [['x', '--logit-bias', '12=500'], /in \[-100, 100\] for token 12/],
      [['x', '--logprobs'], /need --json/],
      [['x', '--top-logprobs', '21', '--json'], /at most 20/],
    ];
    for (const [args, message] of usage) {
      const r = await qk(['generate', ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(message);
      expect(r.err).toContain('qk generate --help');
    }
    const missing = await qk(['generate', 'x', '--model', '/definitely/not/here', '--engine', 'cpu']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('neither a preset');
    // The default model here is tiny (head size 32): refused by the megakernel with or without a GPU.
    const megakernel = await qk(['generate', 'x', '--engine', 'megakernel']);
    expect(megakernel.code).toBe(1);
    expect(megakernel.err).toMatch(
      cudaAvailable() ? /head size 128.*use "layered"/ : /needs a GPU.*use engine "cpu"/,
    );
  });

  it('has help', async () => {
    const r = await qk(['generate', '--help']);
    expect(r.code).toBe(0);
    for (const flag of [
      '--model DIR',
      '--preset',
      '--engine',
      '--max-tokens',
      '--temperature',
      '--top-k',
      '--top-p',
      '--min-p',
      '--presence-penalty',
      '--frequency-penalty',
      '--repetition-penalty',
      '--logit-bias',
      '--logprobs',
      '--top-logprobs',
      '--seed',
      '--max-context',
      '--chat',
      '--no-think',
      '--json',
    ]) {
      expect(r.out).toContain(flag);
    }
  });
});
