/** `qk chat` with piped stdin on the tiny preset: one reply per line, history kept until /reset, /exit ends. */
import { describe, expect, it } from 'vitest';
import { qk } from './run-qk.js';

const tiny = ['--preset', 'tiny', '--engine', 'cpu', '--max-tokens', '3', '--temperature', '0'];

/** Prompt sizes from the per-reply stats lines on stderr. */
function promptSizes(err: string): number[] {
  return [...err.matchAll(/^\[prompt (\d+) tokens/gm)].map((m) => Number(m[1]));
}

describe('qk chat (piped stdin)', () => {
  it('answers each line, keeps the history, clears it on /reset and stops at /exit', async () => {
    const message = `hello ${Math.floor(Math.random() * 1000)}`;
    const r = await qk(
      ['chat', ...tiny, '--no-think'],
      `${message}\n${message}\n/reset\n${message}\n/exit\nnever answered\n`,
    );
    expect(r.code, r.err).toBe(0);
    const sizes = promptSizes(r.err);
    // Three replies: the line after /exit is never read.
    expect(sizes).toHaveLength(3);
    // The second turn carries the first exchange; after /reset the conversation is as new.
    expect(sizes[1]).toBeGreaterThan(sizes[0]! + 4);
    expect(sizes[2]).toBe(sizes[0]);
    expect(r.err).toContain('(history cleared)');
    expect(r.err.match(/meaningless/g)).toHaveLength(1);
  });

  it('ends at end of input, and a system message and thinking mode change the prompt', async () => {
    const plain = promptSizes((await qk(['chat', ...tiny], 'hi\n')).err);
    const system = promptSizes((await qk(['chat', ...tiny, '--system', 'You are a pirate.'], 'hi\n')).err);
    const noThink = promptSizes((await qk(['chat', ...tiny, '--no-think'], 'hi\n')).err);
    expect(plain).toHaveLength(1);
    expect(system[0]).toBeGreaterThan(plain[0]!);
    expect(noThink[0]).toBeGreaterThan(plain[0]!);
  });

  it('tells the user about unknown commands and skips empty lines', async () => {
    const r = await qk(['chat', ...tiny], '\n/help\n\nhi\n');
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('unknown command /help');
    expect(promptSizes(r.err)).toHaveLength(1);
  });

  it('drops a turn that no longer fits the context and says how to go on', async () => {
    const r = await qk(
      ['chat', ...tiny, '--max-context', '24'],
      'one two three\none two three\none two three\n',
    );
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('/reset');
    expect(r.err).toMatch(/context holds 24/);
  });

  it('has help and refuses stray arguments', async () => {
    const help = await qk(['chat', '--help']);
    expect(help.code).toBe(0);
    for (const text of ['/reset', '/exit', 'Ctrl-C', '--system', '--no-think', '--model DIR'])
      expect(help.out).toContain(text);
    const stray = await qk(['chat', 'hello']);
    expect(stray.code).toBe(2);
    expect(stray.err).toContain('qk chat --help');
  });
});
