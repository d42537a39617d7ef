/**
 * The SSE response of a streaming request: `reasoning_content` and `content` deltas split as the text arrives,
 * `tool_calls` deltas (each call whole, once its `</tool_call>` is in), per-token `logprobs` when asked for, the
 * final chunk with the finish reason and usage, then `[DONE]`.
 */
import {
  QkAbortError,
  type Qwen3Model,
  type SampledToken,
  type SplitText,
  ThinkingSplitter,
} from '@qk/qwen3';
import { chatLogprobsOf, completionLogprobsOf, openAiToolCalls, ToolCallStream } from './extras.js';
import { asApiError, FINISH, type Job, logLine, usageOf } from './outcome.js';
import type { SamplingRequest } from './request.js';

/** What a stream needs from its server. */
export interface StreamContext {
  readonly model: Qwen3Model;
  readonly modelId: string;
  readonly log: ((line: string) => void) | undefined;
}

/** The SSE response of a streaming request: one `data:` event per chunk, then `[DONE]`. */
export function streamResponse(
  context: StreamContext,
  job: Job,
  request: SamplingRequest,
  kind: 'chat' | 'completion',
  route: string,
): Response {
  const { model, modelId, log } = context;
  const encoder = new TextEncoder();
  const id = kind === 'chat' ? `chatcmpl-${job.id}` : `cmpl-${job.id}`;
  const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const envelope = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object,
    created: job.created,
    model: modelId,
    choices,
    ...(request.includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const decode = (ids: number[]) => model.tokenizer.decode(ids);
  const logprobsOf = (tokens: readonly SampledToken[] | undefined) =>
    tokens === undefined || tokens.length === 0 || request.options.logprobs !== true
      ? null
      : kind === 'chat'
        ? chatLogprobsOf(tokens, decode)
        : completionLogprobsOf(tokens, model.tokenizer);
  const choice = (
    delta: SplitText | undefined,
    finish: string | null,
    text = '',
    tokens?: readonly SampledToken[],
  ) =>
    kind === 'chat'
      ? {
          index: 0,
          delta:
            delta === undefined
              ? {}
              : {
                  ...(delta.content.length > 0 || job.thinking === 'off' ? { content: delta.content } : {}),
                  ...(delta.reasoning.length > 0 ? { reasoning_content: delta.reasoning } : {}),
                },
          logprobs: logprobsOf(tokens),
          finish_reason: finish,
        }
      : { index: 0, text, logprobs: logprobsOf(tokens), finish_reason: finish };
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (event: unknown) => {
        const data = typeof event === 'string' ? event : JSON.stringify(event);
        if (!job.abort.signal.aborted) controller.enqueue(encoder.encode(`data: ${data}\n\n`));
      };
      const splitter = new ThinkingSplitter(job.thinking);
      // With tools, the answer goes through a second splitter that turns `<tool_call>` blocks into deltas.
      const calls = job.tools === undefined ? undefined : new ToolCallStream(job.tools.tools);
      const sendText = (split: SplitText, tokens?: readonly SampledToken[]) => {
        let piece = split;
        if (calls !== undefined) {
          const out = calls.push(split.content);
          piece = { reasoning: split.reasoning, content: out.content };
          if (out.calls.length > 0) {
            const first = calls.count - out.calls.length;
            send(
              envelope([
                {
                  index: 0,
                  delta: { tool_calls: openAiToolCalls(out.calls, first) },
                  logprobs: null,
                  finish_reason: null,
                },
              ]),
            );
          }
        }
        const scored = request.options.logprobs === true && (tokens?.length ?? 0) > 0;
        if (piece.content.length === 0 && piece.reasoning.length === 0 && !scored) return;
        send(envelope([choice(piece, null, piece.content, tokens)]));
      };
      if (kind === 'chat')
        send(
          envelope([
            { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
          ]),
        );
      try {
        for await (const chunk of job.generation.chunks()) sendText(splitter.push(chunk.text), chunk.tokens);
        sendText(splitter.end());
        const unfinished = calls?.end() ?? '';
        if (unfinished.length > 0) send(envelope([choice({ reasoning: '', content: unfinished }, null)]));
        const { stats } = await job.generation.result;
        const usage = usageOf(stats, stats.generatedTokens);
        const finish =
          (calls?.count ?? 0) > 0 && stats.finishReason === 'stop'
            ? 'tool_calls'
            : FINISH[stats.finishReason];
        const last = envelope([choice(undefined, finish)]);
        // Usage rides on the final chunk always; OpenAI's own extra chunk follows when asked for.
        send({ ...last, usage: request.includeUsage ? null : usage });
        if (request.includeUsage) send(envelope([], { usage }));
        send('[DONE]');
        log?.(logLine(route, 200, stats, ' · streamed'));
      } catch (e) {
        if (e instanceof QkAbortError)
          log?.(logLine(route, 499, undefined, ' · client disconnected, generation cancelled'));
        else {
          const error = asApiError(e);
          log?.(logLine(route, error.status, undefined, `: ${error.message}`));
          send(error.body);
        }
      }
      try {
        controller.close();
      } catch {
        // Already cancelled by the client.
      }
    },
    cancel() {
      job.abort.abort(new Error('the client disconnected'));
    },
  });
  return new Response(body, {
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    },
  });
}
