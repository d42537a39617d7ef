/**
 * Tool calling in Qwen3's format: the template lists the tools as JSON inside `<tools>…</tools>` in the system
 * turn, and the model calls one by writing `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`. This module
 * checks tool definitions, builds the grammar that makes those calls well-formed (xgrammar's structural tags: free
 * text until `<tool_call>`, then the call's JSON with the arguments constrained by the tool's schema), and parses
 * the calls out of a reply, validating the arguments.
 */
import { randomUUID } from 'node:crypto';
import type { StructuralTagFormat, TagFormat } from '@mlc-ai/web-xgrammar';
import { QkValueError } from '@qk/ops';
import { Ajv, type ValidateFunction } from 'ajv';
import type { GrammarSpec } from '../structured/grammar.js';
import { enforceableSchema } from '../structured/schema.js';
import type { ToolCall, ToolDefinition } from '../types.js';

/** Which tools the model may or must call (OpenAI's `tool_choice`). */
export type ToolChoice =
  /** Text, tool calls, or both, as the model decides (default). */
  | 'auto'
  /** No tool call: the tools are not shown to the model. */
  | 'none'
  /** At least one tool call, and nothing but tool calls. */
  | 'required'
  /** Exactly one call of the named tool. */
  | { readonly type: 'function'; readonly function: { readonly name: string } };

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Checks tool definitions (OpenAI's shape) and returns plain copies, `parameters` defaulting to an empty object
 * schema.
 *
 * @throws QkValueError naming the first malformed tool.
 */
export function checkTools(op: string, tools: unknown): ToolDefinition[] {
  if (!Array.isArray(tools))
    throw new QkValueError(op, 'tools', 'must be an array of { type: "function", function } tools.');
  const names = new Set<string>();
  return tools.map((tool, i) => {
    const fn = isObject(tool) && tool.type === 'function' ? tool.function : undefined;
    if (!isObject(fn) || typeof fn.name !== 'string' || !NAME.test(fn.name)) {
      throw new QkValueError(
        op,
        `tools[${i}]`,
        'must be { type: "function", function: { name, description?, parameters? } } with a name of 1–64 letters, digits, _, - or .',
      );
    }
    if (names.has(fn.name))
      throw new QkValueError(op, `tools[${i}]`, `repeats the name "${fn.name}"; names must be unique.`);
    names.add(fn.name);
    if (fn.description !== undefined && typeof fn.description !== 'string') {
      throw new QkValueError(op, `tools[${i}].function.description`, 'must be a string.');
    }
    if (fn.parameters !== undefined && !isObject(fn.parameters)) {
      throw new QkValueError(op, `tools[${i}].function.parameters`, 'must be a JSON Schema object.');
    }
    return {
      type: 'function' as const,
      function: {
        name: fn.name,
        ...(fn.description === undefined ? {} : { description: fn.description }),
        parameters: (fn.parameters as Record<string, unknown> | undefined) ?? {
          type: 'object',
          properties: {},
        },
      },
    };
  });
}

/** The tool `choice` names, checked against `tools`. */
export function checkToolChoice(op: string, choice: unknown, tools: readonly ToolDefinition[]): ToolChoice {
  if (choice === undefined) return 'auto';
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  const name =
    isObject(choice) && choice.type === 'function' && isObject(choice.function)
      ? choice.function.name
      : undefined;
  if (typeof name !== 'string') {
    throw new QkValueError(
      op,
      'toolChoice',
      'must be "auto", "none", "required" or { type: "function", function: { name } }.',
    );
  }
  if (!tools.some((t) => t.function.name === name)) {
    throw new QkValueError(
      op,
      'toolChoice',
      `names "${name}", which is not among the tools (${tools.map((t) => t.function.name).join(', ')}).`,
    );
  }
  return { type: 'function', function: { name } };
}

/** The text that opens a call of `name`, up to its arguments: what Qwen3's template writes for a past call. */
function callPrefix(name: string): string {
  return `${OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": `;
}

const CALL_SUFFIX = `}\n${CLOSE}`;

/**
 * The grammar of a reply that may or must call `tools` per `choice` (at most one call unless `parallel`), after a
 * thinking block when `thinking`.
 * Arguments are constrained by each tool's schema (made enforceable: see structured/schema.ts).
 *
 * @throws QkValueError when a tool's parameters cannot be enforced.
 */
export function toolCallSpec(
  op: string,
  tools: readonly ToolDefinition[],
  choice: ToolChoice,
  thinking: boolean,
  opened = false,
  parallel = true,
): GrammarSpec | undefined {
  if (choice === 'none' || tools.length === 0) return undefined;
  const chosen =
    typeof choice === 'object' ? tools.filter((t) => t.function.name === choice.function.name) : tools;
  const tags: TagFormat[] = chosen.map((tool, i) => ({
    type: 'tag',
    begin: callPrefix(tool.function.name),
    content: {
      type: 'json_schema',
      json_schema: enforceableSchema(
        op,
        `tools[${i}].function.parameters`,
        tool.function.parameters,
      ) as Record<string, unknown>,
    },
    end: CALL_SUFFIX,
  }));
  const calls: StructuralTagFormat =
    choice === 'auto'
      ? { type: 'triggered_tags', triggers: [OPEN], tags, ...(parallel ? {} : { stop_after_first: true }) }
      : // Only calls, separated by a newline as the template writes them; one for a named tool, or without
        // parallel calls.
        {
          type: 'tags_with_separator',
          tags,
          separator: '\n',
          at_least_one: true,
          stop_after_first: typeof choice === 'object' || !parallel,
        };
  return { kind: 'structural', format: afterThinking(calls, thinking, opened) };
}

/**
 * `format` preceded, when `thinking`, by Qwen3's thinking block as its template writes it: `<think>`, free text,
 * `</think>`, a blank line. The block is free; the constraint starts after it. `opened`: the prompt already holds
 * the `<think>` (templates that open the block themselves), so the reply starts inside it.
 */
export function afterThinking(
  format: StructuralTagFormat,
  thinking: boolean,
  opened = false,
): StructuralTagFormat {
  if (!thinking) return format;
  return {
    type: 'sequence',
    elements: [
      { type: 'tag', begin: opened ? '' : '<think>', content: { type: 'any_text' }, end: '</think>' },
      { type: 'const_string', value: '\n\n' },
      format,
    ],
  };
}

/** A call the model wrote that could not be used: unknown tool, JSON that does not parse, invalid arguments. */
export interface InvalidToolCall {
  /** The text between `<tool_call>` and `</tool_call>`. */
  readonly text: string;
  readonly reason: string;
}

/** A reply with its tool calls taken out. */
export interface ParsedToolCalls {
  /** The reply without the `<tool_call>` blocks, trimmed. */
  readonly content: string;
  readonly toolCalls: ToolCall[];
  readonly invalidToolCalls: InvalidToolCall[];
}

const ajv = new Ajv({ strict: false, allErrors: false });
const validators = new WeakMap<object, ValidateFunction>();

function validatorFor(schema: Record<string, unknown>): ValidateFunction {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  return validate;
}

/** Parses one call's JSON and checks it against `tools`. */
function parseCall(text: string, tools: readonly ToolDefinition[]): ToolCall | InvalidToolCall {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { text, reason: `the call is not JSON (${(e as Error).message})` };
  }
  if (!isObject(value) || typeof value.name !== 'string') {
    return { text, reason: 'the call is not an object with a "name"' };
  }
  const tool = tools.find((t) => t.function.name === value.name);
  if (tool === undefined) return { text, reason: `there is no tool named ${JSON.stringify(value.name)}` };
  const args = value.arguments ?? {};
  if (!isObject(args)) return { text, reason: '"arguments" is not an object' };
  const validate = validatorFor(tool.function.parameters ?? {});
  if (!(validate(args) as boolean)) {
    return {
      text,
      reason: `the arguments do not match the schema of ${tool.function.name}: ${ajv.errorsText(validate.errors)}`,
    };
  }
  return {
    id: `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
    name: tool.function.name,
    arguments: args,
  };
}

/** Takes the `<tool_call>` blocks out of `text` (a reply, thinking already removed) and validates each call. */
export function parseToolCalls(text: string, tools: readonly ToolDefinition[]): ParsedToolCalls {
  const toolCalls: ToolCall[] = [];
  const invalidToolCalls: InvalidToolCall[] = [];
  let content = '';
  let at = 0;
  for (;;) {
    const open = text.indexOf(OPEN, at);
    if (open < 0) break;
    const close = text.indexOf(CLOSE, open + OPEN.length);
    // An unclosed call (a reply cut by maxTokens) stays in the content, as written.
    if (close < 0) break;
    content += text.slice(at, open);
    const call = parseCall(text.slice(open + OPEN.length, close).trim(), tools);
    if ('id' in call) toolCalls.push(call);
    else invalidToolCalls.push(call);
    at = close + CLOSE.length;
  }
  content += text.slice(at);
  return { content: content.trim(), toolCalls, invalidToolCalls };
}
