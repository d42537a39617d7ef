/**
 * Prefix reuse through the server (issue 49's bar): a chat whose first message is a long history, three turns, and
 * the time to first token of the third turn, which the server should prefill from where the second left the KV
 * cache, against the same request after `forgetPrefix()` (a cold prefill of the whole prompt). Each run replays
 * turns 1 and 2 first, so every warm turn 3 starts from the same cache contents.
 */
import { seededWords } from './prompts.js';
import {
  type RequestRecord,
  type SoakMessage,
  type SoakOptions,
  type SoakRequest,
  sendChatStream,
} from './soak.js';

/** What a generation straight on the model reports (a subset of @qk/qwen3's GenerationStats). */
export interface ChatStats {
  readonly decodeTokensPerSecond: number;
  /** From the call to the first token: rendering and tokenising the chat, then the prefill. */
  readonly timeToFirstTokenMs: number;
  readonly prefillMs: number;
  readonly cachedPromptTokens: number;
  /** Tokens of the prompt (cached prefix included). */
  readonly promptTokens?: number;
}

export interface PrefixOptions {
  readonly server: Pick<SoakOptions, 'url' | 'model' | 'apiKey' | 'signal'>;
  /** Words of history in the first message (≈ tokens). */
  readonly historyTokens: number;
  /** `max_tokens` of each turn: the replies of turns 1 and 2 join the history. */
  readonly replyTokens: number;
  readonly runs: number;
  promptTokens(messages: readonly SoakMessage[]): number;
  /** Makes the model forget which prefix its cache holds (the server must be idle). */
  forgetPrefix(): void;
  /**
   * The same turns straight on the model, without HTTP, when given: what the server adds to a time to first token
   * shows beside it.
   */
  chat?(messages: readonly SoakMessage[], maxTokens: number): Promise<ChatStats>;
  /**
   * How the turns are sent (the soak's `send`, e.g. a client in a child process); default: Node's fetch in this
   * process. A client in the server's process reads its stream on the server's event loop, which a GPU engine holds
   * while it waits for each decode step's token: the first token's chunk is then seen a step or two late.
   */
  send?(request: SoakRequest, client: number): Promise<RequestRecord>;
}

export interface PrefixTurn {
  readonly ttftMs: number;
  readonly cachedTokens: number;
}

export interface PrefixResult {
  /** Tokens of turn 3's rendered prompt. */
  readonly promptTokens: number;
  readonly warm: PrefixTurn[];
  readonly cold: PrefixTurn[];
  /** Every problem a turn's stream had (the run stops at the first). */
  readonly errors: { kind: string; message: string }[];
  /** Turn 3 through `chat`, reused and cold, per run. */
  readonly library?: { readonly warm: ChatStats[]; readonly cold: ChatStats[] };
}

/** Runs the three-turn chat `runs` times; stops early (with what it has) on a stream error or the signal. */
export async function runPrefixReuse(o: PrefixOptions): Promise<PrefixResult> {
  const history = seededWords(o.historyTokens, 7);
  const first: SoakMessage[] = [
    { role: 'user', content: `Here are my notes. ${history}\n\nWhat are they about?` },
  ];
  // Turn 3 asks for logprobs, so its first token's chunk arrives even when that token completes no character yet:
  // the time to first token is the first token's, not the first whole character's (with random weights a reply
  // often starts with a byte of a longer character). The draw is the same greedy token.
  const send = async (messages: readonly SoakMessage[], logprobs = false): Promise<RequestRecord> => {
    const request: SoakRequest = {
      messages,
      key: 'prefix',
      promptTokens: o.promptTokens(messages),
      logprobs,
      maxTokens: o.replyTokens,
    };
    return o.send !== undefined
      ? o.send(request, 0)
      : sendChatStream({ ...o.server, maxTokens: o.replyTokens }, request, 0);
  };
  const failed = (r: RequestRecord, turn: string) =>
    r.outcome.errors.length > 0 || r.ttftMs === undefined
      ? r.outcome.errors.map((e) => ({ kind: e.kind, message: `${turn}: ${e.message}` }))
      : [];
  const warm: PrefixTurn[] = [];
  const cold: PrefixTurn[] = [];
  const library = { warm: [] as ChatStats[], cold: [] as ChatStats[] };
  let third: SoakMessage[] | undefined;
  for (let run = 0; run < o.runs && !o.server.signal?.aborted; run++) {
    o.forgetPrefix();
    const one = await send(first);
    if (failed(one, 'turn 1').length > 0)
      return { promptTokens: 0, warm, cold, errors: failed(one, 'turn 1') };
    const second: SoakMessage[] = [
      ...first,
      { role: 'assistant', content: one.outcome.text },
      { role: 'user', content: 'Say that again in one line.' },
    ];
    const two = await send(second);
    if (failed(two, 'turn 2').length > 0)
      return { promptTokens: 0, warm, cold, errors: failed(two, 'turn 2') };
    // Greedy replies repeat, so later runs send the very turn 3 of the first run.
    third ??= [
      ...second,
      { role: 'assistant', content: two.outcome.text },
      { role: 'user', content: 'And in one word?' },
    ];
    const reused = await send(third, true);
    o.forgetPrefix();
    const fresh = await send(third, true);
    const errors = [...failed(reused, 'turn 3 (prefix reused)'), ...failed(fresh, 'turn 3 (cold)')];
    if (errors.length > 0) return { promptTokens: 0, warm, cold, errors };
    warm.push({ ttftMs: reused.ttftMs!, cachedTokens: reused.outcome.cachedTokens ?? 0 });
    cold.push({ ttftMs: fresh.ttftMs!, cachedTokens: fresh.outcome.cachedTokens ?? 0 });
    if (o.chat !== undefined) {
      // The model's cache now holds turn 3: replay turns 1 and 2 so that turn 3 reuses what it did over HTTP.
      o.forgetPrefix();
      await o.chat(first, o.replyTokens);
      await o.chat(second, o.replyTokens);
      library.warm.push(await o.chat(third, o.replyTokens));
      o.forgetPrefix();
      library.cold.push(await o.chat(third, o.replyTokens));
    }
  }
  return {
    promptTokens: third === undefined ? 0 : o.promptTokens(third),
    warm,
    cold,
    errors: [],
    ...(o.chat === undefined ? {} : { library }),
  };
}
