/**
 * One streamed reply from qk serve's `/v1/chat/completions`, reported as it grows: content and thinking apart,
 * time to first token, and tokens per second (live from the chunks, exact from `usage` at the end).
 */
import { sseData } from './sse.js';

export interface ReplyStats {
  /** From sending the request to the first text, in ms. */
  readonly ttftMs?: number;
  /** Tokens after the first, per second of decoding. */
  readonly tokensPerSecond?: number;
  readonly tokens: number;
  /** Tokens per second over the last few tokens, one sample per token: the reply's speed over time. */
  readonly rateHistory?: readonly number[];
  /** OpenAI's finish reason, or `'stopped'` when the user pressed Stop. */
  readonly finish?: string;
}

export interface Reply {
  readonly content: string;
  readonly reasoning: string;
  readonly stats: ReplyStats;
  readonly error?: string;
}

export interface ChatTurn {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

interface Chunk {
  choices?: { delta?: { content?: string; reasoning_content?: string }; finish_reason?: string | null }[];
  usage?: { completion_tokens: number } | null;
  error?: { message: string };
}

/** Tokens over which the speed chart's samples are taken. */
const RATE_WINDOW = 8;

/** Streams a reply to `history`, calling `update` with the whole reply so far after every chunk. */
export async function streamReply(
  request: {
    model: string;
    history: readonly ChatTurn[];
    thinking: boolean;
    /** Absent: the server's default. */
    maxTokens?: number;
    apiKey: string;
  },
  update: (reply: Reply) => void,
  signal: AbortSignal,
): Promise<Reply> {
  const sentAt = performance.now();
  let reply: Reply = { content: '', reasoning: '', stats: { tokens: 0 } };
  let firstAt: number | undefined;
  const arrivals: number[] = [];
  const set = (next: Reply) => {
    reply = next;
    update(reply);
  };
  try {
    const response = await fetch('v1/chat/completions', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(request.apiKey ? { authorization: `Bearer ${request.apiKey}` } : {}),
      },
      body: JSON.stringify({
        model: request.model,
        messages: request.history,
        stream: true,
        stream_options: { include_usage: true },
        enable_thinking: request.thinking,
        ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
      }),
      signal,
    });
    if (!response.ok || response.body === null) {
      const body = (await response.json().catch(() => ({}))) as Chunk;
      set({ ...reply, error: body.error?.message ?? `HTTP ${response.status}` });
      return reply;
    }
    for await (const data of sseData(response.body)) {
      if (data === '[DONE]') break;
      const chunk = data as Chunk;
      if (chunk.error) {
        set({ ...reply, error: chunk.error.message });
        break;
      }
      const choice = chunk.choices?.[0];
      const content = choice?.delta?.content ?? '';
      const reasoning = choice?.delta?.reasoning_content ?? '';
      const now = performance.now();
      let stats = reply.stats;
      if (content.length > 0 || reasoning.length > 0) {
        firstAt ??= now;
        arrivals.push(now);
        const tokens = stats.tokens + 1;
        const window = arrivals.slice(-RATE_WINDOW);
        const recent = window.length > 1 ? ((window.length - 1) * 1000) / (now - window[0]!) : undefined;
        stats = {
          ...stats,
          tokens,
          ttftMs: firstAt - sentAt,
          ...(tokens > 1 ? { tokensPerSecond: ((tokens - 1) * 1000) / (now - firstAt) } : {}),
          ...(recent === undefined ? {} : { rateHistory: [...(stats.rateHistory ?? []), recent] }),
        };
      }
      if (choice?.finish_reason) stats = { ...stats, finish: choice.finish_reason };
      if (chunk.usage) stats = { ...stats, tokens: chunk.usage.completion_tokens };
      set({ content: reply.content + content, reasoning: reply.reasoning + reasoning, stats });
    }
  } catch (e) {
    if (signal.aborted) set({ ...reply, stats: { ...reply.stats, finish: 'stopped' } });
    else set({ ...reply, error: e instanceof Error ? e.message : String(e) });
  }
  return reply;
}
