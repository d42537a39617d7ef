/** The serving soak's stream reader and checker, on hand-written OpenAI-style transcripts and broken copies of them. */
import { describe, expect, it } from 'vitest';
import {
  checkChatStream,
  divergentReplies,
  type RequestRecord,
  type SseEvent,
  SseReader,
} from '../src/index.js';

const EXPECT = { model: 'm', promptTokens: 12, maxTokens: 3 };

/** A well-formed stream of `pieces` (one chunk each) in OpenAI's shape, with include_usage's last chunk. */
function transcript(id: string, pieces: string[], usage = { prompt: 12, completion: 3 }): string {
  const chunk = (delta: object, finish: string | null, extra: object = {}) =>
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      usage: null,
      ...extra,
    });
  const events = [
    chunk({ role: 'assistant', content: '' }, null),
    ...pieces.map((p) => chunk({ content: p }, null)),
    chunk({}, 'length'),
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [],
      usage: {
        prompt_tokens: usage.prompt,
        completion_tokens: usage.completion,
        total_tokens: usage.prompt + usage.completion,
        prompt_tokens_details: { cached_tokens: 4 },
      },
    }),
    '[DONE]',
  ];
  return events.map((e) => `data: ${e}\n\n`).join('');
}

/** The events of `text`, fed to the reader in pieces of `step` characters, stamped with their piece's index. */
function read(text: string, step = text.length): SseEvent[] {
  const reader = new SseReader();
  const events: SseEvent[] = [];
  for (let i = 0; i < text.length; i += step) events.push(...reader.push(text.slice(i, i + step), i / step));
  return events;
}

/** `text` with its `index`-th event's JSON changed by `change`. */
function edit(text: string, index: number, change: (chunk: Record<string, unknown>) => void): string {
  const blocks = text.split('\n\n');
  const chunk = JSON.parse(blocks[index]!.slice('data: '.length)) as Record<string, unknown>;
  change(chunk);
  blocks[index] = `data: ${JSON.stringify(chunk)}`;
  return blocks.join('\n\n');
}

const kinds = (text: string) => checkChatStream(read(text), EXPECT).errors.map((e) => e.kind);

describe('SseReader', () => {
  it('yields the same events however the bytes are split, CRLF line ends and comments included', () => {
    const text = `: keep-alive\r\n\r\n${transcript('a', ['x', 'y', 'z'])}`;
    const whole = read(text).map((e) => e.data);
    expect(whole).toHaveLength(7);
    expect(whole[6]).toBe('[DONE]');
    for (const step of [1, 3, 7, 50]) expect(read(text, step).map((e) => e.data)).toEqual(whole);
    const cut = new SseReader();
    expect(cut.push('data: {"id"', 0)).toEqual([]);
    expect(cut.pending).toBe('data: {"id"');
  });
});

describe('checkChatStream', () => {
  it('accepts a well-formed stream and reads its text, id, usage and timings', () => {
    const events = read(transcript('chatcmpl-1', ['He', 'll', 'o']), 40);
    const out = checkChatStream(events, EXPECT);
    expect(out.errors).toEqual([]);
    expect(out).toMatchObject({
      id: 'chatcmpl-1',
      text: 'Hello',
      finishReason: 'length',
      promptTokens: 12,
      completionTokens: 3,
      cachedTokens: 4,
    });
    expect(out.firstTextAt).toBeLessThanOrEqual(out.finishAt!);
  });

  it('times the first token by its logprobs chunk when it completes no character, else by the first text', () => {
    // Piece 1 streams only logprobs (a byte of a longer character), piece 2 the character: stamped 1, 2, 3, … by event.
    const blocks = transcript('chatcmpl-1', ['', 'é', 'x']).split('\n\n');
    const scored = (i: number) =>
      edit(blocks.join('\n\n'), i, (chunk) => {
        (chunk.choices as { logprobs: unknown }[])[0]!.logprobs = {
          content: [{ token: 'bytes:\\xc3', logprob: -1, bytes: [195], top_logprobs: [] }],
        };
        delete ((chunk.choices as { delta: Record<string, unknown> }[])[0]!.delta as Record<string, unknown>)
          .content;
      });
    const stamp = (text: string) => {
      const reader = new SseReader();
      return text.split('\n\n').flatMap((b, i) => (b === '' ? [] : reader.push(`${b}\n\n`, i)));
    };
    const withBytes = checkChatStream(stamp(scored(1)), EXPECT);
    expect(withBytes.errors).toEqual([]);
    expect(withBytes.firstTokenAt).toBe(1);
    expect(withBytes.firstTextAt).toBe(2);
    const plain = checkChatStream(stamp(transcript('chatcmpl-1', ['a', 'b', 'c'])), EXPECT);
    expect(plain.firstTokenAt).toBe(1);
    expect(plain.firstTextAt).toBe(1);
    // Chunks with neither text nor logprobs carry no token: nothing to time.
    const empty = checkChatStream(stamp(transcript('chatcmpl-1', ['', '', ''])), EXPECT);
    expect(empty.firstTokenAt).toBeUndefined();
  });

  it('finds a chunk of another response spliced into the stream', () => {
    const mine = transcript('chatcmpl-1', ['a', 'b', 'c']).split('\n\n');
    const theirs = transcript('chatcmpl-2', ['X', 'Y', 'Z']).split('\n\n');
    mine.splice(2, 1, theirs[2]!);
    const out = checkChatStream(read(mine.join('\n\n')), EXPECT);
    expect(out.errors.map((e) => e.kind)).toEqual(['mixed']);
    expect(out.errors[0]!.message).toContain('chatcmpl-2');
  });

  it("finds usage that counts another request's prompt", () => {
    expect(kinds(transcript('c', ['a', 'b', 'c'], { prompt: 40, completion: 3 }))).toEqual(['mixed']);
  });

  it('finds a stream cut short, a missing [DONE], data after it, a bad event and an error object', () => {
    const good = transcript('c', ['a', 'b', 'c']);
    expect(kinds(good.replace('data: [DONE]\n\n', ''))).toEqual(['no-done']);
    expect(kinds(`${good}data: {"id":"c"}\n\n`)).toEqual(['no-done']);
    expect(kinds(good.replace('"content":"b"}', '"content":"b"'))).toEqual(['parse']);
    const withError = good.replace(
      'data: [DONE]',
      'data: {"error":{"message":"boom","type":"server_error"}}\n\ndata: [DONE]',
    );
    expect(kinds(withError)).toEqual(['api-error']);
    const cut = good.slice(0, good.indexOf('"finish_reason":"length"'));
    const out = checkChatStream(read(cut), EXPECT, false);
    expect(new Set(out.errors.map((e) => e.kind))).toEqual(new Set(['no-done', 'no-finish', 'no-usage']));
    expect(out.errors.find((e) => e.kind === 'no-done')!.message).toContain('mid-stream');
  });

  it('finds usage that is missing, does not add up or breaks max_tokens, and a second finish reason', () => {
    const good = transcript('c', ['a', 'b', 'c']);
    const noUsage = good
      .split('\n\n')
      .filter((_, i) => i !== 5)
      .join('\n\n');
    expect(kinds(noUsage)).toEqual(['no-usage']);
    const badTotal = edit(good, 5, (c) => {
      (c.usage as { total_tokens: number }).total_tokens += 1;
    });
    expect(kinds(badTotal)).toEqual(['no-usage']);
    // Past max_tokens, and so also not the length that finish_reason length claims.
    expect(kinds(transcript('c', ['a', 'b', 'c', 'd'], { prompt: 12, completion: 4 }))).toEqual([
      'no-usage',
      'no-usage',
    ]);
    // finish_reason length must mean max_tokens were generated.
    expect(kinds(transcript('c', ['a', 'b'], { prompt: 12, completion: 2 }))).toEqual(['no-usage']);
    // The last text chunk also says stop: two finish reasons.
    const twice = edit(good, 3, (c) => {
      (c.choices as { finish_reason: string }[])[0]!.finish_reason = 'stop';
    });
    expect(kinds(twice)).toEqual(['no-finish']);
  });
});

describe('divergentReplies', () => {
  const record = (key: string, text: string, errors = 0): RequestRecord => ({
    client: 0,
    key,
    outcome: {
      text,
      errors: Array.from({ length: errors }, () => ({ kind: 'http' as const, message: 'x' })),
    },
    latencyMs: 1,
    endedAt: 1,
  });

  it('counts replies that differ from the first error-free reply to the same prompt', () => {
    const records = [
      record('a', 'one'),
      record('b', 'two'),
      record('a', 'one'),
      record('a', 'uno'),
      record('b', 'zwei', 1),
    ];
    expect(divergentReplies(records)).toBe(1);
  });
});
