/**
 * Rendering chat messages with the model's own Jinja chat template, after checking them.
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { checkTools } from '../chat/tools.js';
import { QkLimitError, QkTokenizerError } from '../errors.js';
import type { ChatMessage, ChatTemplateOptions } from '../types.js';
import { LIMITS, quote, safeText } from '../untrusted.js';

const ROLES: ReadonlySet<string> = new Set<ChatMessage['role']>(['system', 'user', 'assistant', 'tool']);

/** Special-token names that `transformers` passes to every chat template alongside the messages. */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? quote(value) : typeof value;
}

/** A message as Qwen3's template reads it (Hugging Face's field names). */
export interface TemplateMessage {
  readonly role: ChatMessage['role'];
  readonly content: string;
  readonly reasoning_content?: string;
  readonly tool_calls?: readonly {
    readonly type: 'function';
    readonly function: { readonly name: string; readonly arguments: Readonly<Record<string, unknown>> };
  }[];
}

/** The text of a message's content: a string, text parts joined, or `''` for none. */
function contentText(content: unknown, index: number): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    return content
      .map((part: unknown, i) => {
        const p = part as { type?: unknown; text?: unknown } | null;
        if (typeof p === 'object' && p !== null && p.type === 'text' && typeof p.text === 'string')
          return p.text;
        throw new QkTokenizerError(
          `messages[${index}].content[${i}] must be a text part { type: "text", text }, got ${describe(part)}; Qwen3 reads text only.`,
        );
      })
      .join('');
  }
  throw new QkTokenizerError(
    `messages[${index}].content must be a string or an array of text parts, got ${describe(content)}.`,
  );
}

/** Checks `messages` the way the template needs them and returns them in the template's shape. */
export function checkMessages(messages: readonly ChatMessage[]): TemplateMessage[] {
  if (!Array.isArray(messages)) {
    throw new QkTokenizerError(`applyChatTemplate needs an array of messages, got ${describe(messages)}.`);
  }
  if (messages.length === 0) {
    throw new QkTokenizerError(
      'applyChatTemplate needs at least one message, e.g. [{ role: "user", content }].',
    );
  }
  return messages.map((message: unknown, index) => {
    if (typeof message !== 'object' || message === null) {
      throw new QkTokenizerError(
        `messages[${index}] must be an object { role, content }, got ${describe(message)}.`,
      );
    }
    const { role, content, reasoning, toolCalls } = message as Record<string, unknown>;
    if (typeof role !== 'string' || !ROLES.has(role)) {
      throw new QkTokenizerError(
        `messages[${index}].role must be one of ${[...ROLES].join(', ')}; got ${describe(role)}.`,
      );
    }
    const checked: { -readonly [K in keyof TemplateMessage]: TemplateMessage[K] } = {
      role: role as ChatMessage['role'],
      content: contentText(content, index),
    };
    if (reasoning !== undefined) {
      if (typeof reasoning !== 'string' || role !== 'assistant') {
        throw new QkTokenizerError(`messages[${index}].reasoning must be a string on an assistant message.`);
      }
      checked.reasoning_content = reasoning;
    }
    if (toolCalls !== undefined) {
      if (role !== 'assistant' || !Array.isArray(toolCalls)) {
        throw new QkTokenizerError(`messages[${index}].toolCalls must be an array on an assistant message.`);
      }
      checked.tool_calls = toolCalls.map((call: unknown, i) => {
        const c = call as { name?: unknown; arguments?: unknown } | null;
        if (typeof c?.name !== 'string' || typeof c.arguments !== 'object' || c.arguments === null) {
          throw new QkTokenizerError(
            `messages[${index}].toolCalls[${i}] must be { id, name, arguments: object }, got ${describe(call)}.`,
          );
        }
        return {
          type: 'function' as const,
          function: { name: c.name, arguments: c.arguments as Record<string, unknown> },
        };
      });
    }
    return checked;
  });
}

function checkFlag(
  options: ChatTemplateOptions,
  name: keyof ChatTemplateOptions,
  fallback: boolean,
): boolean {
  const value = options[name];
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new QkTokenizerError(
      `applyChatTemplate option ${name} must be true or false, got ${describe(value)}.`,
    );
  }
  return value;
}

/** The text of a special token as `tokenizer_config.json` stores it: a string or an `AddedToken` object. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { content?: unknown }).content === 'string'
  ) {
    return (value as { content: string }).content;
  }
  return undefined;
}

/** The budgets of one render; see {@link LIMITS}. */
export interface TemplateBudget {
  readonly steps: number;
  readonly rangeElements: number;
  readonly outputChars: number;
  readonly ms: number;
}

const DEFAULT_BUDGET: TemplateBudget = {
  steps: LIMITS.templateSteps,
  rangeElements: LIMITS.templateRange,
  outputChars: LIMITS.templateOutputChars,
  ms: LIMITS.templateMs,
};

type Evaluate = (statement: unknown, environment: unknown) => { type: string; value: unknown };

/** `strftime` for the formats chat templates use (as @huggingface/jinja's own `strftime_now`). */
function strftimeNow(format: string): string {
  const date = new Date();
  const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);
  return String(format).replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case '%Y':
        return `${date.getFullYear()}`;
      case '%m':
        return pad2(date.getMonth() + 1);
      case '%d':
        return pad2(date.getDate());
      case '%b':
        return new Intl.DateTimeFormat(undefined, { month: 'short' }).format(date);
      case '%B':
        return new Intl.DateTimeFormat(undefined, { month: 'long' }).format(date);
      case '%H':
        return pad2(date.getHours());
      case '%M':
        return pad2(date.getMinutes());
      default:
        return '%';
    }
  });
}

/**
 * Renders a parsed template under `budget`: every evaluation step is counted and the clock checked, `range()`
 * refuses to build more elements than the budget has left, and any string longer than the output budget stops the
 * render. A template cannot be interrupted from outside (it runs synchronously), so it must bound itself.
 *
 * @throws QkLimitError naming `origin` and the budget exceeded.
 */
function renderWithBudget(
  parsed: unknown,
  variables: Record<string, unknown>,
  origin: string,
  budget: TemplateBudget,
): string {
  const over = (key: string, limit: string, what: string) => new QkLimitError(origin, key, limit, what);
  let steps = 0;
  let rangeLeft = budget.rangeElements;
  const deadline = Date.now() + budget.ms;
  const env = new Environment();
  const globals: Record<string, unknown> = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: (start: number, stop?: number, step = 1) => {
      let from = start;
      let to = stop;
      if (to === undefined) {
        to = from;
        from = 0;
      }
      if (![from, to, step].every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw new Error('range() takes finite numbers');
      }
      if (step === 0) throw new Error('range() step must not be zero');
      const count = Math.max(0, Math.ceil((to - from) / step));
      if (Date.now() > deadline) throw over('chat_template', `${budget.ms} ms per render`, 'runs too long');
      if (count > rangeLeft) {
        throw over(
          'chat_template range()',
          `${budget.rangeElements} range() elements per render`,
          `asks for ${count} elements`,
        );
      }
      rangeLeft -= count;
      return Array.from({ length: count }, (_, i) => from + i * step);
    },
    strftime_now: strftimeNow,
    ...variables,
  };
  for (const [key, value] of Object.entries(globals)) env.set(key, value as never);
  const interpreter = new Interpreter(env);
  const base = (Interpreter.prototype as unknown as { evaluate: Evaluate }).evaluate;
  (interpreter as unknown as { evaluate: Evaluate }).evaluate = function (statement, environment) {
    if (++steps > budget.steps) {
      throw over('chat_template', `${budget.steps} evaluation steps per render`, 'runs too long');
    }
    if ((steps & 1023) === 0 && Date.now() > deadline) {
      throw over('chat_template', `${budget.ms} ms per render`, 'runs too long');
    }
    const result = base.call(this, statement, environment);
    if (typeof result?.value === 'string' && result.value.length > budget.outputChars) {
      throw over(
        'chat_template',
        `${budget.outputChars} characters of output`,
        `builds a string of ${result.value.length} characters`,
      );
    }
    return result;
  };
  const result = interpreter.run(parsed as never) as { value: unknown };
  const text = String(result.value);
  if (text.length > budget.outputChars) {
    throw over(
      'chat_template',
      `${budget.outputChars} characters of output`,
      `renders ${text.length} characters`,
    );
  }
  return text;
}

/** A compiled chat template plus the special tokens it may refer to. */
export class ChatTemplate {
  readonly #template: Template;
  readonly #origin: string;
  readonly #budget: TemplateBudget;
  readonly #specialTokens: Record<string, string> = {};

  /**
   * @param source The Jinja source (`chat_template` of `tokenizer_config.json`).
   * @param config The tokenizer config, for the special-token variables the template may use.
   * @param origin Where the template came from, named in errors.
   */
  constructor(
    source: string,
    config: Record<string, unknown>,
    origin: string,
    budget: TemplateBudget = DEFAULT_BUDGET,
  ) {
    this.#origin = origin;
    this.#budget = budget;
    if (typeof source !== 'string' || source.length > LIMITS.configBytes) {
      throw new QkLimitError(origin, 'chat_template', `${LIMITS.configBytes} characters`, 'is too long');
    }
    try {
      this.#template = new Template(source);
    } catch (error) {
      throw new QkTokenizerError(
        `The chat template of ${origin} does not parse (${(error as Error).message}); fix chat_template in ` +
          'tokenizer_config.json or use the one from the model repository.',
      );
    }
    for (const key of SPECIAL_TOKEN_KEYS) {
      const text = tokenText(config[key]);
      if (text !== undefined) this.#specialTokens[key] = text;
    }
  }

  /** Renders `messages` (checked first); defaults as in {@link ChatTemplateOptions}. */
  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const checked = checkMessages(messages);
    const addGenerationPrompt = checkFlag(options, 'addGenerationPrompt', true);
    const enableThinking = checkFlag(options, 'enableThinking', true);
    const tools = options.tools === undefined ? [] : checkTools('applyChatTemplate', options.tools);
    try {
      return renderWithBudget(
        this.#template.parsed,
        {
          ...this.#specialTokens,
          messages: checked,
          add_generation_prompt: addGenerationPrompt,
          enable_thinking: enableThinking,
          // Templates test `if tools`: an empty list must read as none.
          tools: tools.length > 0 ? tools : null,
        },
        this.#origin,
        this.#budget,
      );
    } catch (error) {
      if (error instanceof QkLimitError) throw error;
      throw new QkTokenizerError(
        `The chat template failed to render these ${checked.length} messages: ${safeText(String((error as Error)?.message ?? error))}.`,
      );
    }
  }
}
