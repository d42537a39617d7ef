/**
 * One chat turn beyond plain text: what the template is given (tools), what the reply is constrained to (a schema,
 * a grammar or tool calls, after the thinking block when Qwen3 thinks), and how the finished reply is taken apart
 * into reasoning, answer and tool calls.
 */
import { QkValueError } from '@qk/ops';
import type { Generation, GenerationResult } from '../generation/generation.js';
import type { GrammarSpec } from '../structured/grammar.js';
import { type JsonSchema, type StructuredOptions, structuredSpec } from '../structured/index.js';
import type { ChatTemplateOptions, ToolCall, ToolDefinition } from '../types.js';
import { describeValue } from '../untrusted.js';
import { ThinkingSplitter } from './thinking.js';
import {
  afterThinking,
  checkToolChoice,
  checkTools,
  type InvalidToolCall,
  parseToolCalls,
  type ToolChoice,
  toolCallSpec,
} from './tools.js';

/** Tool options of `Qwen3Model.chat`. */
export interface ChatToolOptions {
  /**
   * Functions the model may call (OpenAI's shape). Qwen3's template lists them; the reply's
   * `<tool_call>` blocks become {@link ChatResult.toolCalls}, their arguments constrained while they are written
   * (xgrammar structural tags) and validated against each tool's `parameters`. Default none.
   */
  readonly tools?: readonly ToolDefinition[];
  /**
   * `'auto'` (default: text and/or calls), `'none'` (no calls; the tools are not shown), `'required'` (only calls,
   * at least one) or `{ type: 'function', function: { name } }` (exactly one call of that tool).
   */
  readonly toolChoice?: ToolChoice;
  /**
   * Whether one reply may hold several calls (default `true`, as OpenAI's `parallel_tool_calls`). `false`: at most
   * one call per reply, with `'required'` exactly one.
   */
  readonly parallelToolCalls?: boolean;
}

/** What a finished chat turn produced, taken apart. */
export interface ChatResult extends GenerationResult {
  /** The thinking: the text of the reply's `<think>…</think>` block, trimmed; `''` when there was none. */
  readonly reasoning: string;
  /** The answer: the reply after the thinking block, without tool-call blocks, trimmed. */
  readonly content: string;
  /** The tools the reply called, arguments validated; empty when it called none. */
  readonly toolCalls: readonly ToolCall[];
  /** `<tool_call>` blocks that could not be used (unknown tool, invalid arguments), with the reason. */
  readonly invalidToolCalls: readonly InvalidToolCall[];
}

/** `Qwen3Model.chat`'s generation: its result is a {@link ChatResult}. */
export type ChatGeneration = Generation & { readonly result: Promise<ChatResult> };

/** A chat turn's setup. */
export interface PreparedChat {
  readonly templateOptions: ChatTemplateOptions;
  /** Whether the reply starts with Qwen3's thinking (thinking on, and the prompt ends at the assistant's header). */
  readonly thinks: boolean;
  /**
   * What the reply is constrained to, the option that asked for it (named in errors), and the schema its answer
   * must validate against; none: free text. `opened`: the prompt already opened the thinking block (see
   * {@link promptOpensThinking}).
   */
  constraint(
    opened: boolean,
  ): { readonly spec: GrammarSpec; readonly param: string; readonly schema?: JsonSchema } | undefined;
  /** Takes a finished reply apart; `opened` as for {@link PreparedChat.constraint}. */
  finish(result: GenerationResult, opened: boolean): ChatResult;
}

/**
 * Checks a chat turn's template, structure and tool options.
 *
 * @throws QkValueError for malformed tools, a tool choice naming no tool, or a schema combined with tool calls.
 */
export function prepareChat(
  op: string,
  options: (ChatTemplateOptions & StructuredOptions & ChatToolOptions) | undefined,
): PreparedChat {
  const addGenerationPrompt = options?.addGenerationPrompt ?? true;
  const enableThinking = options?.enableThinking ?? true;
  const tools = options?.tools === undefined ? [] : checkTools(op, options.tools);
  const choice = checkToolChoice(op, options?.toolChoice, tools);
  const parallel = options?.parallelToolCalls ?? true;
  if (typeof parallel !== 'boolean') {
    throw new QkValueError(op, 'parallelToolCalls', `must be true or false, got ${describeValue(parallel)}.`);
  }
  const structured = structuredSpec(op, options);
  // The reply opens with `<think>` only when the prompt ends at the assistant's header with thinking on.
  const thinks = addGenerationPrompt && enableThinking;
  const calling = choice !== 'none' && tools.length > 0;
  if (structured !== undefined && calling) {
    throw new QkValueError(
      op,
      structured.kind,
      'cannot be combined with tools (the reply is either tool calls or the structured text); pass toolChoice "none" or drop one of them.',
    );
  }
  const constraint = (opened: boolean): ReturnType<PreparedChat['constraint']> => {
    if (structured !== undefined) {
      const spec: GrammarSpec =
        !thinks || structured.kind === 'structural'
          ? structured
          : {
              kind: 'structural',
              format: afterThinking(
                structured.kind === 'schema'
                  ? { type: 'json_schema', json_schema: structured.schema }
                  : { type: 'grammar', grammar: structured.grammar },
                true,
                opened,
              ),
            };
      return {
        spec,
        param: structured.kind,
        ...(structured.kind === 'schema' ? { schema: structured.schema } : {}),
      };
    }
    const spec = calling ? toolCallSpec(op, tools, choice, thinks, opened, parallel) : undefined;
    return spec === undefined ? undefined : { spec, param: 'tools' };
  };
  // Refuse parameters that cannot be enforced now, not when the generation starts.
  constraint(false);
  return {
    templateOptions: { addGenerationPrompt, enableThinking, ...(calling ? { tools } : {}) },
    thinks,
    constraint,
    finish(result, opened) {
      const splitter = new ThinkingSplitter(thinks ? (opened ? 'open' : 'maybe') : 'off');
      const head = splitter.push(result.text);
      const tail = splitter.end();
      const reasoning = (head.reasoning + tail.reasoning).trim();
      const answer = head.content + tail.content;
      const parsed = calling
        ? parseToolCalls(answer, tools)
        : { content: answer.trim(), toolCalls: [], invalidToolCalls: [] };
      return { ...result, reasoning, ...parsed };
    },
  };
}
