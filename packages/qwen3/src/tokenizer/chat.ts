/**
 * Rendering chat messages with the model's own Jinja chat template, after checking them.
 */
import { Template } from '@huggingface/jinja';
import { QkTokenizerError } from '../errors.js';
import type { ChatMessage, ChatTemplateOptions } from '../types.js';

const ROLES: ReadonlySet<string> = new Set<ChatMessage['role']>(['system', 'user', 'assistant', 'tool']);

/** Special-token names that `transformers` passes to every chat template alongside the messages. */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? JSON.stringify(value) : typeof value;
}

/** Checks `messages` the way the template would need them and returns plain copies (role and content only). */
export function checkMessages(messages: readonly ChatMessage[]): ChatMessage[] {
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
    const { role, content } = message as Record<string, unknown>;
    if (typeof role !== 'string' || !ROLES.has(role)) {
      throw new QkTokenizerError(
        `messages[${index}].role must be one of ${[...ROLES].join(', ')}; got ${describe(role)}.`,
      );
    }
    if (typeof content !== 'string') {
      throw new QkTokenizerError(`messages[${index}].content must be a string, got ${describe(content)}.`);
    }
    return { role: role as ChatMessage['role'], content };
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

/** A compiled chat template plus the special tokens it may refer to. */
export class ChatTemplate {
  readonly #template: Template;
  readonly #specialTokens: Record<string, string> = {};

  /**
   * @param source The Jinja source (`chat_template` of `tokenizer_config.json`).
   * @param config The tokenizer config, for the special-token variables the template may use.
   * @param origin Where the template came from, named in errors.
   */
  constructor(source: string, config: Record<string, unknown>, origin: string) {
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
    try {
      return this.#template.render({
        ...this.#specialTokens,
        messages: checked,
        add_generation_prompt: addGenerationPrompt,
        enable_thinking: enableThinking,
      });
    } catch (error) {
      throw new QkTokenizerError(
        `The chat template failed to render these ${checked.length} messages: ${(error as Error).message}.`,
      );
    }
  }
}
