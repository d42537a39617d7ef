/**
 * The Qwen3 tokenizer: byte-level BPE from `@huggingface/tokenizers`, the chat template through
 * `@huggingface/jinja`, and streaming detokenisation.
 */

import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { QkError } from '@qk/ops';
import { QkLimitError, QkTokenizerError } from '../errors.js';
import type { ChatMessage, ChatTemplateOptions, Qwen3Tokenizer, TextStream } from '../types.js';
import { describeValue, quote, safeText, unboundedBacktracking } from '../untrusted.js';
import { ChatTemplate, checkMessages } from './chat.js';
import {
  modelDirTokenizer,
  readTokenizerFiles,
  requireBundledTokenizer,
  type TokenizerData,
  type TokenizerFiles,
} from './files.js';
import { SectionCache, sectionSplitter } from './sections.js';
import { IncrementalDecoder } from './stream.js';
import type { TokenVocabulary } from './vocabulary.js';

/** `value` with `f` applied to every string inside it (arrays and plain objects copied, other values kept). */
function mapStrings<T>(value: T, f: (text: string) => string): T {
  if (typeof value === 'string') return f(value) as T;
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, f)) as T;
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapStrings(v, f)])) as T;
  }
  return value;
}

/** Options of {@link loadTokenizer}. */
export interface LoadTokenizerOptions {
  /**
   * A model directory. Its own `tokenizer.json` + `tokenizer_config.json` are used when it has both; with neither,
   * the bundled Qwen3 tokenizer is used; with only one of them, loading fails.
   */
  readonly dir?: string;
  /** Extra ids that end generation, usually the config's `eos_token_id`s (default none). */
  readonly eosTokenIds?: readonly number[];
}

/** Token texts that end a Qwen3 turn or document, whatever the config's EOS says. */
const STOP_TOKENS = ['<|im_end|>', '<|endoftext|>'];

/** Everything built from one pair of files; shared by every tokenizer loaded from the same bundled data. */
interface TokenizerCore {
  readonly hf: Tokenizer;
  /** One past the largest id. */
  readonly vocabSize: number;
  /** `1` where an id below `vocabSize` names a token; `undefined` when every id does. */
  readonly holes: Uint8Array | undefined;
  readonly source: string;
  readonly templateSource: string | undefined;
  readonly config: Record<string, unknown>;
  /** Texts of the added tokens marked `special` (`<|im_start|>`, `<|im_end|>`, …), longest first. */
  readonly specialTexts: readonly string[];
  /** Compiled on first use, so a broken template does not block plain encoding. */
  template?: ChatTemplate;
  /** How the model's pieces spell bytes, from `tokenizer.json`'s decoder (for grammar engines). */
  readonly pieceEncoding: TokenVocabulary['encoding'];
  /** Each id's piece, built on first use by {@link HfQwen3Tokenizer.vocabulary}. */
  vocabulary?: TokenVocabulary;
  /** The split at added tokens when `encode` may go section by section (see sections.ts); else undefined. */
  readonly splitSections: ((text: string) => string[]) | undefined;
  /** Ids of long sections encoded before (a chat's earlier turns). */
  readonly sections: SectionCache;
  /**
   * The last chat `encodeChat` encoded (its messages and options as JSON) and its ids: a server that counts a
   * request's prompt and then starts the chat renders and encodes it once.
   */
  lastChat?: { readonly key: string; readonly ids: readonly number[] };
}

/** `byte_level` for GPT-2-style byte-level BPE (Qwen3), `byte_fallback` for `<0xAB>` pieces, else `raw`. */
function pieceEncodingOf(decoder: unknown): TokenVocabulary['encoding'] {
  const types: string[] = [];
  const visit = (d: unknown) => {
    if (typeof d !== 'object' || d === null) return;
    const { type, decoders } = d as { type?: unknown; decoders?: unknown };
    if (typeof type === 'string') types.push(type);
    if (Array.isArray(decoders)) decoders.forEach(visit);
  };
  visit(decoder);
  if (types.includes('ByteLevel')) return 'byte_level';
  if (types.includes('ByteFallback')) return 'byte_fallback';
  return 'raw';
}

/** Ids of the model vocabulary and the added tokens, from `tokenizer.json`. */
function collectIds(json: Record<string, unknown>): number[] {
  const ids: number[] = [];
  const vocab = (json.model as { vocab: unknown }).vocab;
  if (Array.isArray(vocab)) {
    // Unigram models list [piece, score] pairs; the id is the position.
    for (let i = 0; i < vocab.length; i++) ids.push(i);
  } else if (typeof vocab === 'object' && vocab !== null) {
    for (const id of Object.values(vocab)) if (Number.isInteger(id)) ids.push(id as number);
  }
  const added = json.added_tokens;
  if (Array.isArray(added)) {
    for (const token of added) {
      const id = (token as { id?: unknown })?.id;
      if (Number.isInteger(id)) ids.push(id as number);
    }
  }
  return ids;
}

/** Largest token id (and vocabulary size) a tokenizer may have: far above any published model's 256k. */
export const MAX_TOKEN_ID = (1 << 24) - 1;

/** Every `{ pattern: { Regex } }` of a tokenizer definition, with the key path where it sits. */
function regexPatterns(value: unknown, path: string, out: { path: string; source: string }[]): void {
  if (typeof value !== 'object' || value === null) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      regexPatterns(v, `${path}[${i}]`, out);
    });
    return;
  }
  for (const [key, v] of Object.entries(value)) {
    if (key === 'vocab' || key === 'merges' || key === 'added_tokens') continue;
    const regex = (v as { Regex?: unknown } | null)?.Regex;
    if (key === 'pattern' && typeof regex === 'string')
      out.push({ path: `${path}.pattern.Regex`, source: regex });
    else regexPatterns(v, `${path}.${key}`, out);
  }
}

/**
 * Checks what the tokenizer library would otherwise trust: token ids are integers in range (an id of 1e300 must not
 * size an array), BPE merges are pairs of known tokens, and no regex can backtrack without bound.
 *
 * @throws QkLimitError for an id or count over a limit or a dangerous regex; QkTokenizerError for malformed data.
 */
function checkTokenizerJson(json: Record<string, unknown>, file: string): void {
  const badId = (key: string, id: unknown): never => {
    throw new QkLimitError(file, key, `ids 0…${MAX_TOKEN_ID}`, `is ${describeValue(id, 40)}, not a token id`);
  };
  const model = json.model as Record<string, unknown>;
  const vocab = model.vocab;
  if (Array.isArray(vocab)) {
    if (vocab.length > MAX_TOKEN_ID + 1) badId('model.vocab (length)', vocab.length);
  } else if (typeof vocab === 'object' && vocab !== null) {
    for (const [token, id] of Object.entries(vocab)) {
      if (!Number.isSafeInteger(id) || (id as number) < 0 || (id as number) > MAX_TOKEN_ID) {
        badId(`model.vocab[${quote(token, 40)}]`, id);
      }
    }
  } else {
    throw new QkTokenizerError(
      `${file}: model.vocab must be an object (or a list), got ${describeValue(vocab, 40)}.`,
    );
  }
  const added = json.added_tokens;
  if (added !== undefined && added !== null) {
    if (!Array.isArray(added)) {
      throw new QkTokenizerError(`${file}: added_tokens must be a list, got ${describeValue(added, 40)}.`);
    }
    added.forEach((token: unknown, i) => {
      const { id, content } = (token ?? {}) as { id?: unknown; content?: unknown };
      if (!Number.isSafeInteger(id) || (id as number) < 0 || (id as number) > MAX_TOKEN_ID)
        badId(`added_tokens[${i}].id`, id);
      if (typeof content !== 'string' || content.length === 0) {
        throw new QkTokenizerError(
          `${file}: added_tokens[${i}].content must be a non-empty string, got ${describeValue(content, 40)}.`,
        );
      }
    });
  }
  const merges = model.merges;
  if (merges !== undefined || model.type === 'BPE') {
    if (!Array.isArray(merges)) {
      throw new QkTokenizerError(
        `${file}: model.merges must be a list of merges, got ${describeValue(merges, 40)}.`,
      );
    }
    const known = typeof vocab === 'object' && vocab !== null && !Array.isArray(vocab) ? vocab : undefined;
    merges.forEach((merge: unknown, i) => {
      let pair: [string, string] | undefined;
      if (typeof merge === 'string') {
        const parts = merge.split(' ');
        if (parts.length === 2 && parts[0]!.length > 0 && parts[1]!.length > 0) pair = [parts[0]!, parts[1]!];
      } else if (
        Array.isArray(merge) &&
        merge.length === 2 &&
        typeof merge[0] === 'string' &&
        typeof merge[1] === 'string' &&
        merge[0].length > 0 &&
        merge[1].length > 0
      ) {
        pair = [merge[0], merge[1]];
      }
      if (pair === undefined) {
        throw new QkTokenizerError(
          `${file}: model.merges[${i}] is ${describeValue(merge, 60)}; a merge is "left right" (two tokens and one space) or ["left", "right"]. The file is corrupted.`,
        );
      }
      if (known !== undefined) {
        for (const token of [pair[0], pair[1], pair[0] + pair[1]]) {
          if (!Object.hasOwn(known, token)) {
            throw new QkTokenizerError(
              `${file}: model.merges[${i}] (${describeValue(merge, 60)}) uses or makes the token ${quote(token, 40)}, which model.vocab does not hold. The file is corrupted.`,
            );
          }
        }
      }
    });
  }
  const patterns: { path: string; source: string }[] = [];
  regexPatterns(
    { normalizer: json.normalizer, pre_tokenizer: json.pre_tokenizer, decoder: json.decoder },
    '',
    patterns,
  );
  for (const { path, source } of patterns) {
    const why = unboundedBacktracking(source);
    if (why !== undefined) {
      throw new QkLimitError(
        file,
        path.slice(1),
        'regexes that backtrack at most polynomially',
        `is ${quote(source, 80)}: ${why}`,
      );
    }
  }
}

function buildCore(data: TokenizerData): TokenizerCore {
  checkTokenizerJson(data.tokenizerJson, path.join(data.source, 'tokenizer.json'));
  let hf: Tokenizer;
  try {
    hf = new Tokenizer(data.tokenizerJson, data.tokenizerConfig);
  } catch (error) {
    throw new QkTokenizerError(
      `The tokenizer files in ${data.source} could not be loaded (${(error as Error).message}); ` +
        'use the tokenizer.json and tokenizer_config.json from the model repository.',
    );
  }
  const ids = collectIds(data.tokenizerJson);
  let vocabSize = 0;
  for (const id of ids) if (id >= vocabSize) vocabSize = id + 1;
  if (vocabSize === 0) throw new QkTokenizerError(`The tokenizer in ${data.source} has an empty vocabulary.`);
  const known = new Uint8Array(vocabSize);
  let distinct = 0;
  for (const id of ids) {
    if (id >= 0 && known[id] === 0) {
      known[id] = 1;
      distinct++;
    }
  }
  const specialTexts = (Array.isArray(data.tokenizerJson.added_tokens) ? data.tokenizerJson.added_tokens : [])
    .filter((t: { special?: unknown }) => t.special === true)
    .map((t: { content: string }) => t.content)
    .sort((a: string, b: string) => b.length - a.length);
  return {
    hf,
    specialTexts,
    vocabSize,
    holes: distinct === vocabSize ? undefined : known,
    source: data.source,
    templateSource: data.chatTemplate,
    config: data.tokenizerConfig,
    pieceEncoding: pieceEncodingOf(data.tokenizerJson.decoder),
    splitSections: sectionSplitter(hf, data.tokenizerJson),
    sections: new SectionCache(),
  };
}

async function loadCore(files: TokenizerFiles): Promise<TokenizerCore> {
  return buildCore(await readTokenizerFiles(files));
}

/** The bundled data is ~11 MB of JSON and takes most of a second to parse and index, so each file set is kept. */
const bundledCores = new Map<string, Promise<TokenizerCore>>();

function bundledCore(files: TokenizerFiles): Promise<TokenizerCore> {
  const key = `${files.tokenizerJson}\n${files.tokenizerConfig}`;
  let core = bundledCores.get(key);
  if (core === undefined) {
    core = loadCore(files);
    bundledCores.set(key, core);
    // A failed load must not be remembered: the user may fix the files and retry.
    core.catch(() => bundledCores.delete(key));
  }
  return core;
}

function checkEosIds(ids: readonly number[] | undefined): readonly number[] {
  if (ids === undefined) return [];
  if (!Array.isArray(ids)) throw new QkTokenizerError('eosTokenIds must be an array of token ids.');
  for (const id of ids) {
    if (!Number.isSafeInteger(id) || id < 0) {
      throw new QkTokenizerError(`eosTokenIds must hold non-negative integers, got ${String(id)}.`);
    }
  }
  return ids;
}

/** {@link Qwen3Tokenizer} over one {@link TokenizerCore}. */
class HfQwen3Tokenizer implements Qwen3Tokenizer {
  readonly vocabSize: number;
  readonly stopIds: ReadonlySet<number>;
  readonly #core: TokenizerCore;

  constructor(core: TokenizerCore, eosTokenIds: readonly number[]) {
    this.#core = core;
    this.vocabSize = core.vocabSize;
    const stops = new Set<number>(eosTokenIds);
    for (const token of STOP_TOKENS) {
      const id = core.hf.token_to_id(token);
      if (id !== undefined) stops.add(id);
    }
    this.stopIds = stops;
  }

  /** Ids of `text`; special-token text such as `<|im_start|>` maps to its id, and no BOS is added. */
  encode(text: string): number[] {
    if (typeof text !== 'string') throw new QkTokenizerError(`encode needs a string, got ${typeof text}.`);
    if (text.length === 0) return [];
    const core = this.#core;
    if (core.splitSections === undefined || text.length < core.sections.minChars)
      return this.#encodeWhole(text);
    const sections = this.#library('encoding', () => core.splitSections!(text));
    const ids: number[] = [];
    for (const section of sections) {
      if (section.length === 0) continue;
      let got = core.sections.get(section);
      if (got === undefined) {
        got = this.#encodeWhole(section);
        core.sections.set(section, got);
      }
      for (const id of got) ids.push(id);
    }
    return ids;
  }

  /** The library's ids of `text` in one call, checked. */
  #encodeWhole(text: string): number[] {
    // A post-processor that adds BOS/EOS would make encode(applyChatTemplate(...)) differ from the template text.
    return this.#checkedIds(
      this.#library('encoding', () => this.#core.hf.encode(text, { add_special_tokens: false }).ids),
    );
  }

  /** Runs a call into the tokenizer library, turning its untyped errors (from malformed files) into ours. */
  #library<T>(what: string, call: () => T): T {
    try {
      return call();
    } catch (error) {
      if (error instanceof QkError) throw error;
      throw new QkTokenizerError(
        `The tokenizer in ${this.#core.source} failed while ${what} (${safeText(String((error as Error)?.message ?? error))}); its tokenizer.json may be malformed.`,
      );
    }
  }

  /** Ids the library produced, checked: a piece with no id (and no unk_token) must not become `undefined`. */
  #checkedIds(ids: readonly unknown[]): number[] {
    for (const id of ids) {
      if (!Number.isSafeInteger(id) || (id as number) < 0 || (id as number) >= this.#core.vocabSize) {
        throw new QkTokenizerError(
          `The tokenizer in ${this.#core.source} produced ${describeValue(id, 40)} for a piece of text it has no token for, and it has no unk_token; its tokenizer.json is incomplete.`,
        );
      }
    }
    return ids as number[];
  }

  /** Text of `ids` with special tokens kept, so a decoded chat transcript is exact. */
  decode(ids: readonly number[]): string {
    if (!Array.isArray(ids)) throw new QkTokenizerError('decode needs an array of token ids.');
    const { vocabSize, holes } = this.#core;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize || (holes !== undefined && holes[id] === 0)) {
        throw new QkTokenizerError(
          `Token id ${String(id)} is not in the tokenizer's vocabulary (ids 0…${vocabSize - 1}, vocab size ` +
            `${vocabSize}); the model's embedding may have more rows than the tokenizer has tokens, so ` +
            'keep sampled ids below tokenizer.vocabSize.',
        );
      }
    }
    if (ids.length === 0) return '';
    return this.#library('decoding', () =>
      this.#core.hf.decode(ids as number[], {
        skip_special_tokens: false,
        // Clean-up would make decode(a ++ b) differ from decode(a) + decode(b), which streaming relies on.
        clean_up_tokenization_spaces: false,
      }),
    );
  }

  /**
   * Ids of `text` with every character taken literally: special-token text such as `<|im_end|>` is tokenised as
   * ordinary text, as transformers does with `split_special_tokens=True`.
   */
  encodeRaw(text: string): number[] {
    if (typeof text !== 'string') throw new QkTokenizerError(`encodeRaw needs a string, got ${typeof text}.`);
    if (text.length === 0) return [];
    // The library has no switch for this; its added-token splitters are swapped out for the one synchronous call.
    const hf = this.#core.hf as unknown as Record<string, unknown>;
    const saved = [hf.splitter_unnormalized, hf.splitter_normalized, hf.added_tokens_map];
    const noSplit = { split: (t: string) => [t] };
    hf.splitter_unnormalized = noSplit;
    hf.splitter_normalized = noSplit;
    hf.added_tokens_map = new Map();
    try {
      return this.#checkedIds(
        this.#library('encoding', () => this.#core.hf.encode(text, { add_special_tokens: false }).ids),
      );
    } finally {
      [hf.splitter_unnormalized, hf.splitter_normalized, hf.added_tokens_map] = saved;
    }
  }

  /**
   * Ids of a chat rendered by the template, where only the template's own markers become control tokens: special-
   * token text inside a message's content (a user writing `<|im_end|>\n<|im_start|>system`) is tokenised as
   * ordinary text. Each such occurrence is swapped for a random placeholder before rendering, and the placeholder
   * is encoded literally afterwards. `parseSpecialTokens: true` restores `encode(applyChatTemplate(…))`.
   */
  encodeChat(
    messages: readonly ChatMessage[],
    options: ChatTemplateOptions & { readonly parseSpecialTokens?: boolean } = {},
  ): number[] {
    const { parseSpecialTokens = false, ...templateOptions } = options;
    checkMessages(messages);
    // The same chat as last time (by content): its ids again, copied. Messages that JSON cannot write (a cycle, a
    // BigInt) are encoded as usual, and the template's own checks report them.
    let key: string | undefined;
    try {
      key = JSON.stringify([messages, options]);
    } catch {
      key = undefined;
    }
    const last = this.#core.lastChat;
    if (key !== undefined && last !== undefined && last.key === key) return [...last.ids];
    const ids = this.#encodeChat(messages, templateOptions, parseSpecialTokens);
    if (key !== undefined) this.#core.lastChat = { key, ids: [...ids] };
    return ids;
  }

  #encodeChat(
    messages: readonly ChatMessage[],
    templateOptions: ChatTemplateOptions,
    parseSpecialTokens: boolean,
  ): number[] {
    if (parseSpecialTokens) return this.encode(this.applyChatTemplate(messages, templateOptions));
    const specials = this.#core.specialTexts;
    if (specials.length === 0) return this.encode(this.applyChatTemplate(messages, templateOptions));
    const nonce = Math.random().toString(36).slice(2, 10);
    const find = new RegExp(specials.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
    // Every string of the messages (contents, reasoning, tool arguments) is escaped alike; tool definitions come
    // from the developer, not the conversation, and are rendered as given.
    const hide = <T>(value: T): T =>
      mapStrings(value, (text) => text.replace(find, (t) => `\ue000${nonce}:${specials.indexOf(t)}\ue001`));
    const escaped = hide(messages);
    const rendered = this.applyChatTemplate(escaped, templateOptions);
    const pieces = rendered.split(new RegExp(`\ue000${nonce}:(\\d+)\ue001`));
    const ids: number[] = [];
    pieces.forEach((piece, i) => {
      // A loop, not push(...): a long piece has more ids than a call may take arguments.
      for (const id of i % 2 === 0 ? this.encode(piece) : this.encodeRaw(specials[Number(piece)]!))
        ids.push(id);
    });
    return ids;
  }

  /** The model's pieces by id, for grammar engines that build token masks (see `structured/`). */
  vocabulary(): TokenVocabulary {
    const core = this.#core;
    if (core.vocabulary === undefined) {
      const pieces = Array.from({ length: core.vocabSize }, (_, id) => core.hf.id_to_token(id) ?? '');
      core.vocabulary = { pieces, encoding: core.pieceEncoding };
    }
    return core.vocabulary;
  }

  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string {
    const core = this.#core;
    if (core.template === undefined) {
      if (core.templateSource === undefined) {
        throw new QkTokenizerError(
          `The tokenizer in ${core.source} has no chat template; add chat_template to tokenizer_config.json ` +
            '(or a chat_template.jinja beside it), or format the prompt yourself and call encode.',
        );
      }
      core.template = new ChatTemplate(core.templateSource, core.config, core.source);
    }
    return core.template.render(messages, options);
  }

  createStream(): TextStream {
    return new IncrementalDecoder((ids) => this.decode(ids));
  }
}

/**
 * Loads the Qwen3 tokenizer: a model directory's own files when `options.dir` has them, else the bundled data
 * (`QK_TOKENIZER_DIR`, a `tokenizer/` folder beside the main script, or the `tokenizer/` folder shipped in @qk/qwen3), which is
 * parsed once per process.
 *
 * @throws {QkTokenizerError} When files are missing, unreadable or malformed, or no bundled data is found.
 */
export async function loadTokenizer(options: LoadTokenizerOptions = {}): Promise<Qwen3Tokenizer> {
  const eosTokenIds = checkEosIds(options.eosTokenIds);
  const own = options.dir === undefined ? undefined : modelDirTokenizer(options.dir);
  const core = own !== undefined ? await loadCore(own) : await bundledCore(requireBundledTokenizer());
  return new HfQwen3Tokenizer(core, eosTokenIds);
}
