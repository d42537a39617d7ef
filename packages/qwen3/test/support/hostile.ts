/**
 * Helpers for hostile-input tests: a small byte-level BPE tokenizer written from scratch (so tests can mutate it
 * cheaply), a micro Qwen3 config, and a check that an error message is safe to print.
 */
import { expect } from 'vitest';
import type { Qwen3Config } from '../../src/types.js';

/** A Qwen3 config small enough to write and load in milliseconds. */
export const MICRO_CONFIG: Qwen3Config = Object.freeze({
  hiddenSize: 16,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
  intermediateSize: 24,
  vocabSize: 64,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  maxPositionEmbeddings: 128,
  torchDtype: 'f32',
  eosTokenIds: Object.freeze([1]),
});

/** Qwen's pre-tokenizer regex, as its tokenizer.json spells it. */
export const QWEN_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** A Qwen-style chat template, short enough to mutate. */
export const MICRO_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * A byte-level BPE `tokenizer.json` over the printable ASCII characters (ids 0…94, with `Ġ` for space and `Ċ` for
 * newline), a few merges, and the special tokens `<|im_start|>` and `<|im_end|>`.
 */
export function microTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  let id = 0;
  for (let c = 0x21; c <= 0x7e; c++) vocab[String.fromCharCode(c)] = id++;
  // Byte-level BPE's stand-ins for space and newline.
  for (const c of ['Ġ', 'Ċ']) vocab[c] = id++;
  const merges = [
    ['Ġ', 't'],
    ['h', 'e'],
    ['Ġt', 'he'],
    ['i', 'n'],
    ['a', 'n'],
  ];
  for (const [a, b] of merges) vocab[a! + b!] = id++;
  return {
    version: '1.0',
    added_tokens: [
      {
        id: id,
        content: '<|im_start|>',
        special: true,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
      },
      {
        id: id + 1,
        content: '<|im_end|>',
        special: true,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
      },
    ],
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: QWEN_SPLIT }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

/** The `tokenizer_config.json` that goes with {@link microTokenizerJson}. */
export function microTokenizerConfig(): Record<string, unknown> {
  return {
    eos_token: '<|im_end|>',
    pad_token: '<|im_end|>',
    chat_template: MICRO_TEMPLATE,
    model_max_length: 128,
    tokenizer_class: 'Qwen2Tokenizer',
  };
}

/** Asserts that `message` can be printed safely: short, with no raw control characters. */
export function expectPrintable(message: string, maxChars = 2000): void {
  expect(message.length).toBeLessThanOrEqual(maxChars);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point.
  expect(message).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
}

/** `depth` nested arrays around `inner`, as JSON text. */
export function nestedJson(depth: number, inner = '1'): string {
  return `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
}
