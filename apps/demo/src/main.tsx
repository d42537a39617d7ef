/**
 * The chat page: a conversation with the model qk serve runs, each reply streamed with its thinking shown apart,
 * a Stop button, and the reply's time to first token and tokens per second, live.
 */
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { type ChatTurn, type Reply, type ReplyStats, streamReply } from './chat.js';

interface Entry {
  readonly user: string;
  readonly reply: Reply;
}

const KEY_STORAGE = 'qk-demo-api-key';

function formatStats(stats: ReplyStats, streaming: boolean): string {
  const parts: string[] = [];
  if (stats.ttftMs !== undefined) parts.push(`TTFT ${stats.ttftMs.toFixed(0)} ms`);
  if (stats.tokensPerSecond !== undefined) parts.push(`${stats.tokensPerSecond.toFixed(1)} tok/s`);
  parts.push(`${stats.tokens} tokens`);
  if (stats.finish !== undefined) parts.push(stats.finish);
  else if (streaming) parts.push('streaming…');
  return parts.join(' · ');
}

/** A small line chart of tok/s over the reply. */
function RateChart({ samples }: { samples: readonly number[] }) {
  if (samples.length < 2) return null;
  const width = 160;
  const height = 28;
  const top = Math.max(...samples) * 1.1;
  const points = samples
    .map(
      (v, i) =>
        `${((i / (samples.length - 1)) * width).toFixed(1)},${(height - (v / top) * height).toFixed(1)}`,
    )
    .join(' ');
  return (
    <svg
      class="rate"
      width={width}
      height={height}
      data-testid="rate-chart"
      aria-label="tok/s over the reply"
    >
      <title>{`tok/s over the reply (peak ${Math.max(...samples).toFixed(1)})`}</title>
      <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}

function Message({ entry, streaming }: { entry: Entry; streaming: boolean }) {
  const { reply } = entry;
  return (
    <>
      <div class="message user" data-testid="user-message">
        {entry.user}
      </div>
      <div class="message assistant" data-testid="assistant-message">
        {reply.reasoning.length > 0 && (
          <details class="thinking" open={streaming} data-testid="thinking">
            <summary>Thinking</summary>
            {reply.reasoning}
          </details>
        )}
        <div data-testid="content">{reply.content}</div>
        {reply.error !== undefined && <div class="error">{reply.error}</div>}
        <div class="stats">
          <span data-testid="stats">{formatStats(reply.stats, streaming)}</span>
          <RateChart samples={reply.stats.rateHistory ?? []} />
        </div>
      </div>
    </>
  );
}

function App() {
  const [model, setModel] = useState<string | undefined>();
  const [status, setStatus] = useState('connecting…');
  const [apiKey, setApiKey] = useState(() => localStorage.getItem(KEY_STORAGE) ?? '');
  const [entries, setEntries] = useState<Entry[]>([]);
  const [input, setInput] = useState('');
  const [thinking, setThinking] = useState(true);
  const [maxTokens, setMaxTokens] = useState('');
  const [streaming, setStreaming] = useState(false);
  const controller = useRef<AbortController | null>(null);

  useEffect(() => {
    localStorage.setItem(KEY_STORAGE, apiKey);
    fetch('v1/models', apiKey ? { headers: { authorization: `Bearer ${apiKey}` } } : {})
      .then(async (r) => {
        const body = (await r.json()) as { data?: { id: string }[]; error?: { message: string } };
        if (!r.ok) throw new Error(body.error?.message ?? `HTTP ${r.status}`);
        setModel(body.data?.[0]?.id);
        setStatus('');
      })
      .catch((e: unknown) => setStatus(e instanceof Error ? e.message : String(e)));
  }, [apiKey]);

  async function send(event: Event) {
    event.preventDefault();
    const text = input.trim();
    if (text.length === 0 || streaming || model === undefined) return;
    setInput('');
    const history: ChatTurn[] = entries.flatMap((e) => [
      { role: 'user' as const, content: e.user },
      { role: 'assistant' as const, content: e.reply.content },
    ]);
    history.push({ role: 'user', content: text });
    const index = entries.length;
    const update = (reply: Reply) =>
      setEntries((all) => {
        const next = all.slice(0, index);
        next.push({ user: text, reply });
        return next;
      });
    update({ content: '', reasoning: '', stats: { tokens: 0 } });
    controller.current = new AbortController();
    setStreaming(true);
    try {
      const limit = Number.parseInt(maxTokens, 10);
      await streamReply(
        { model, history, thinking, apiKey, ...(limit > 0 ? { maxTokens: limit } : {}) },
        update,
        controller.current.signal,
      );
    } finally {
      setStreaming(false);
      controller.current = null;
    }
  }

  return (
    <main>
      <header>
        <h1>qk chat</h1>
        <span class="model" data-testid="model">
          {model ?? status}
        </span>
        <label>
          <input
            type="checkbox"
            checked={thinking}
            data-testid="thinking-toggle"
            onChange={(e) => setThinking((e.target as HTMLInputElement).checked)}
          />{' '}
          thinking
        </label>
        <label>
          max tokens{' '}
          <input
            type="number"
            min="1"
            placeholder="server's"
            value={maxTokens}
            data-testid="max-tokens"
            onInput={(e) => setMaxTokens((e.target as HTMLInputElement).value)}
          />
        </label>
        <a href="benchmarks.html" data-testid="bench-link">
          benchmarks
        </a>
        {status !== '' && model === undefined && (
          <label>
            API key{' '}
            <input
              type="password"
              value={apiKey}
              onChange={(e) => setApiKey((e.target as HTMLInputElement).value)}
            />
          </label>
        )}
      </header>
      <section class="log">
        {entries.map((entry, i) => (
          <Message key={i} entry={entry} streaming={streaming && i === entries.length - 1} />
        ))}
      </section>
      <form onSubmit={send}>
        <textarea
          value={input}
          placeholder="Message Qwen3 (Enter sends, Shift+Enter for a new line)"
          data-testid="input"
          onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) void send(e);
          }}
        />
        {streaming ? (
          <button
            type="button"
            class="secondary"
            data-testid="stop"
            onClick={() => controller.current?.abort()}
          >
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="send" disabled={model === undefined}>
            Send
          </button>
        )}
        <button type="button" class="secondary" disabled={streaming} onClick={() => setEntries([])}>
          Clear
        </button>
      </form>
    </main>
  );
}

render(<App />, document.getElementById('app')!);
