/**
 * The soak's requests: seeded English-like text of about N tokens (common words are one token each in Qwen3's
 * vocabulary, so N words ≈ N tokens), and which prompt each client sends when. Runs repeat: the same client and
 * index always send the same messages.
 */
import type { SoakMessage, SoakRequest } from './soak.js';

const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they ' +
  'you were her she there been one all we their has would when if so no will more some what about up out them ' +
  'can time only new could into two may then do first any like now my other than its our over also how after ' +
  'back most see where make way well just these people even made through long little because good each'
).split(' ');

/** `count` words drawn by a fixed LCG from `seed`: the same text on every run and machine. */
export function seededWords(count: number, seed: number): string {
  let s = (seed * 2654435761 + 12345) % 2 ** 31;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    out.push(WORDS[s % WORDS.length]!);
  }
  return out.join(' ');
}

/**
 * Client `c`'s prompts: one per length in `lengths`, each `c` words longer than the base so that requests in flight
 * at once rarely share a prompt length (a usage counting another request's prompt then shows), and tagged with the
 * client so that no two clients share a prompt. `promptTokens` renders the chat template as the server will.
 */
export function soakRequests(
  lengths: readonly number[],
  promptTokens: (messages: readonly SoakMessage[]) => number,
): (client: number, index: number) => SoakRequest {
  const made = new Map<string, SoakRequest>();
  return (client, index) => {
    const variant = (client + index) % lengths.length;
    const key = `${client}/${variant}`;
    let request = made.get(key);
    if (request === undefined) {
      const text = seededWords(lengths[variant]! + client, client * 97 + variant);
      const messages: SoakMessage[] = [
        { role: 'user', content: `Client ${client}, prompt ${variant}: continue this text. ${text}` },
      ];
      request = { messages, key, promptTokens: promptTokens(messages) };
      made.set(key, request);
    }
    return request;
  };
}
