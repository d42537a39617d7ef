import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { Rng } from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QkTokenizerError } from '../src/errors.js';
import { locateBundledTokenizer, requireBundledTokenizer } from '../src/tokenizer/files.js';
import { bundledTokenizerFiles, IncrementalDecoder, loadTokenizer } from '../src/tokenizer/index.js';
import type { ChatMessage, Qwen3Tokenizer } from '../src/types.js';

// Qwen3's published ids, written down independently of the tokenizer files.
const ENDOFTEXT = 151643;
const IM_START = 151644;
const IM_END = 151645;
const THINK = 151667;
const END_THINK = 151668;
const QWEN3_VOCAB = 151669; // 151643 BPE tokens + 26 added tokens

/**
 * GPT-2 byte-level order, which Qwen's first 256 ids follow: printable Latin-1 bytes (0x21–0x7e, 0xa1–0xac,
 * 0xae–0xff) come first in byte order, then every other byte in byte order.
 */
const BYTE_ORDER: number[] = (() => {
  const printable = (b: number) =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const all = [...Array(256).keys()];
  return [...all.filter(printable), ...all.filter((b) => !printable(b))];
})();
/** The character GPT-2 uses for each byte: itself when printable, else U+0100 onwards in order. */
const BYTE_CHAR: string[] = (() => {
  const chars: string[] = [];
  let next = 0x100;
  for (const b of BYTE_ORDER)
    chars[b] =
      b < 0x21 || (b > 0x7e && b < 0xa1) || b === 0xad ? String.fromCharCode(next++) : String.fromCharCode(b);
  return chars;
})();
const byteId = (b: number) => BYTE_ORDER.indexOf(b);
const utf8 = (s: string) => [...new TextEncoder().encode(s)];

const RANGES: [number, number][] = [
  [0x20, 0x7e], // ASCII
  [0x20, 0x7e],
  [0xc0, 0x17f], // Latin-1 and Latin Extended-A
  [0x300, 0x36f], // combining marks
  [0x400, 0x4ff], // Cyrillic
  [0x600, 0x6ff], // Arabic
  [0x900, 0x97f], // Devanagari
  [0x3040, 0x30ff], // kana
  [0x4e00, 0x9fff], // CJK
  [0xac00, 0xd7a3], // Hangul
  [0x1f300, 0x1faff], // emoji (4 bytes)
  [0x20000, 0x2a6df], // CJK extension B (4 bytes)
];
const EXTRAS = [
  ' ',
  '\n',
  '\t',
  '  ',
  '\r\n',
  '\u200d',
  '\ufe0f',
  '\u{1f3fd}',
  '👨‍👩‍👧',
  '<|im_end|>',
  '<think>',
];

function randomText(rng: Rng, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) {
    if (rng.nextFloat() < 0.15) {
      s += EXTRAS[rng.nextInt(EXTRAS.length)];
      continue;
    }
    const [lo, hi] = RANGES[rng.nextInt(RANGES.length)]!;
    s += String.fromCodePoint(lo + rng.nextInt(hi - lo + 1));
  }
  return s;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function streamAll(tok: Qwen3Tokenizer, ids: readonly number[]): string[] {
  const stream = tok.createStream();
  const chunks = ids.map((id) => stream.push(id));
  chunks.push(stream.flush());
  return chunks;
}

let qwen: Qwen3Tokenizer;
let scratch: string;

/** A tiny byte-level BPE tokenizer: ids 0–255 are bytes, 256 merges "h"+"i", 257 is a hole, 258/259 are added. */
function writeTinyTokenizer(dir: string, config: Record<string, unknown>): void {
  mkdirSync(dir, { recursive: true });
  const vocab: Record<string, number> = {};
  BYTE_ORDER.forEach((b, id) => {
    vocab[BYTE_CHAR[b]!] = id;
  });
  vocab.hi = 256;
  const added = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [added(258, '<|endoftext|>'), added(259, '<|im_end|>')],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, byte_fallback: false, vocab, merges: ['h i'] },
  };
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'qk-tokenizer-'));
  qwen = await loadTokenizer({ eosTokenIds: [ENDOFTEXT, 42] });
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('bundled Qwen3 tokenizer', () => {
  it('has the Qwen3 vocabulary and stop ids', () => {
    expect(qwen.vocabSize).toBe(QWEN3_VOCAB);
    expect([...qwen.stopIds].sort((a, b) => a - b)).toEqual([42, ENDOFTEXT, IM_END]);
  });

  it('maps special-token text to the published ids and adds no BOS', () => {
    expect(qwen.encode('<|endoftext|>')).toEqual([ENDOFTEXT]);
    expect(qwen.encode('<|im_start|>user\n')).toEqual([IM_START, 872, 198]);
    expect(qwen.encode('<|im_start|>assistant\n<think>')).toEqual([IM_START, 77091, 198, THINK]);
    expect(qwen.encode('</think><|im_end|>')).toEqual([END_THINK, IM_END]);
    expect(qwen.encode('Hello')).toEqual([9707]);
    expect(qwen.encode(' ')).toEqual([220]);
    expect(qwen.encode('')).toEqual([]);
  });

  it('decodes byte tokens in GPT-2 byte order', () => {
    expect(qwen.decode(utf8('🤗').map(byteId))).toBe('🤗');
    expect(qwen.decode(utf8('Ωé中').map(byteId))).toBe('Ωé中');
  });

  it('round-trips random unicode text (after NFC, which the tokenizer applies)', () => {
    const rng = new Rng(7);
    for (let i = 0; i < 200; i++) {
      const text = randomText(rng, 1 + rng.nextInt(60));
      const ids = qwen.encode(text);
      for (const id of ids) expect(id).toBeLessThan(QWEN3_VOCAB);
      expect(qwen.decode(ids)).toBe(text.normalize('NFC'));
    }
    expect(qwen.decode(qwen.encode('e\u0301'))).toBe('\u00e9');
  });

  it('keeps special tokens when decoding, so transcripts are exact', () => {
    const transcript = '<|im_start|>assistant\n<think>\nhm\n</think>\n\nOK<|im_end|>\n<|endoftext|>';
    expect(qwen.decode(qwen.encode(transcript))).toBe(transcript);
  });

  it('decodes [] to the empty string and rejects ids outside the vocabulary', () => {
    expect(qwen.decode([])).toBe('');
    for (const bad of [QWEN3_VOCAB, 151935, -1, 1.5, Number.NaN]) {
      expect(() => qwen.decode([9707, bad])).toThrow(QkTokenizerError);
    }
    expect(() => qwen.decode([QWEN3_VOCAB])).toThrow(/151669.*vocab size 151669/);
  });

  it('rejects non-string input to encode and bad eosTokenIds', async () => {
    expect(() => qwen.encode(42 as unknown as string)).toThrow(QkTokenizerError);
    await expect(loadTokenizer({ eosTokenIds: [-3] })).rejects.toThrow(/eosTokenIds/);
  });
});

describe('chat template', () => {
  const user = (content: string): ChatMessage => ({ role: 'user', content });
  const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });

  it('renders one user message', () => {
    expect(qwen.applyChatTemplate([user('Hi')])).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('renders system + user', () => {
    const text = qwen.applyChatTemplate([{ role: 'system', content: 'Be terse.' }, user('Hi')]);
    expect(text).toBe(
      '<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('drops the thinking of assistant turns before the last user message', () => {
    const text = qwen.applyChatTemplate([
      { role: 'system', content: 'S' },
      user('q1'),
      assistant('<think>\nplan\n</think>\n\nA1'),
      user('q2'),
    ]);
    expect(text).toBe(
      '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq1<|im_end|>\n' +
        '<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('keeps (or adds empty) thinking on a final assistant turn', () => {
    const opts = { addGenerationPrompt: false };
    expect(qwen.applyChatTemplate([user('q'), assistant('<think>\nplan\n</think>\n\nA')], opts)).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nA<|im_end|>\n',
    );
    expect(qwen.applyChatTemplate([user('q'), assistant('A')], opts)).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n',
    );
  });

  it('adds an empty think block when thinking is off, only with a generation prompt', () => {
    expect(qwen.applyChatTemplate([user('Hi')], { enableThinking: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
    expect(qwen.applyChatTemplate([user('Hi')], { enableThinking: false, addGenerationPrompt: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n',
    );
  });

  it('groups consecutive tool results into one user turn', () => {
    const text = qwen.applyChatTemplate([
      user('q'),
      assistant('calling'),
      { role: 'tool', content: 'r1' },
      { role: 'tool', content: 'r2' },
    ]);
    expect(text).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncalling<|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('rejects malformed messages with the offending field named', () => {
    const bad = (messages: unknown) => () => qwen.applyChatTemplate(messages as ChatMessage[]);
    expect(bad([])).toThrow(/at least one message/);
    expect(bad('hi')).toThrow(/array of messages/);
    expect(bad([user('ok'), { role: 'bot', content: 'x' }])).toThrow(/messages\[1\]\.role .*"bot"/);
    expect(bad([{ role: 'user', content: 3 }])).toThrow(/messages\[0\]\.content must be a string/);
    expect(bad([null])).toThrow(QkTokenizerError);
    expect(() => qwen.applyChatTemplate([user('x')], { enableThinking: 'no' as unknown as boolean })).toThrow(
      /enableThinking/,
    );
  });
});

describe('streaming detokenisation', () => {
  it('never emits half a character and emits everything exactly once', () => {
    const rng = new Rng(11);
    for (let i = 0; i < 150; i++) {
      const text = randomText(rng, 1 + rng.nextInt(80));
      const ids = qwen.encode(text);
      const chunks = streamAll(qwen, ids);
      expect(chunks.join('')).toBe(qwen.decode(ids));
      for (const chunk of chunks) {
        expect(chunk).not.toContain('\ufffd');
        expect(chunk).not.toMatch(LONE_SURROGATE);
      }
    }
  });

  it('matches decode on random id sequences drawn from encodings (invalid UTF-8 included)', () => {
    const rng = new Rng(12);
    const pool = qwen.encode(randomText(rng, 3000));
    for (let i = 0; i < 150; i++) {
      const ids = Array.from({ length: 1 + rng.nextInt(40) }, () => pool[rng.nextInt(pool.length)]!);
      const chunks = streamAll(qwen, ids);
      expect(chunks.join('')).toBe(qwen.decode(ids));
      for (const chunk of chunks) expect(chunk).not.toMatch(LONE_SURROGATE);
    }
  });

  it('holds single-byte tokens until the character is complete', () => {
    const stream = qwen.createStream();
    expect(utf8('a🤗中').map((b) => stream.push(byteId(b)))).toEqual(['a', '', '', '', '🤗', '', '', '中']);
    expect(stream.flush()).toBe('');
  });

  it('emits text before an incomplete character at once', () => {
    const stream = qwen.createStream();
    expect(stream.push(9707)).toBe('Hello');
    // " " followed by the first three bytes of 👋
    expect(stream.push(qwen.encode(' 👋')[0]!)).toBe(' ');
    expect(stream.push(byteId(utf8('👋')[3]!))).toBe('👋');
  });

  it('turns an incomplete character at the end into U+FFFD on flush, then starts afresh', () => {
    const stream = qwen.createStream();
    const partial = utf8('🤗').slice(0, 2).map(byteId);
    expect(partial.map((id) => stream.push(id))).toEqual(['', '']);
    expect(stream.flush()).toBe('\ufffd');
    expect(qwen.decode(partial)).toBe('\ufffd');
    expect(stream.push(9707)).toBe('Hello');
  });

  it('throws on an invalid id without losing its state', () => {
    const stream = qwen.createStream();
    expect(stream.push(byteId(0xe4))).toBe('');
    expect(() => stream.push(QWEN3_VOCAB + 5)).toThrow(QkTokenizerError);
    expect(stream.push(byteId(0xb8))).toBe('');
    expect(stream.push(byteId(0xad))).toBe('中');
  });

  it('decodes only a window, not everything so far', () => {
    const ids = qwen.encode(randomText(new Rng(13), 3000));
    let decodedIds = 0;
    const stream = new IncrementalDecoder((window) => {
      decodedIds += window.length;
      return qwen.decode(window);
    });
    let text = '';
    for (const id of ids) text += stream.push(id);
    text += stream.flush();
    expect(text).toBe(qwen.decode(ids));
    expect(decodedIds).toBeLessThan(8 * ids.length);
  });

  it('keeps context for decoders that treat the first token differently', () => {
    // SentencePiece-style: "▁" marks a space, and a leading space is dropped.
    const pieces = ['▁Hello', '▁world', '!', '▁again'];
    const decode = (ids: readonly number[]) =>
      ids
        .map((id) => pieces[id])
        .join('')
        .replaceAll('▁', ' ')
        .replace(/^ /, '');
    const stream = new IncrementalDecoder(decode);
    const chunks = [0, 1, 2, 3].map((id) => stream.push(id));
    expect(chunks).toEqual(['Hello', ' world', '!', ' again']);
    expect(chunks.join('') + stream.flush()).toBe(decode([0, 1, 2, 3]));
  });
});

describe('loading from a model directory', () => {
  const tinyTemplate = '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}';

  it("uses the directory's own files when it has both", async () => {
    const dir = path.join(scratch, 'tiny');
    writeTinyTokenizer(dir, { chat_template: tinyTemplate, eos_token: '<|im_end|>' });
    const tok = await loadTokenizer({ dir });
    expect(tok.vocabSize).toBe(260);
    expect([...tok.stopIds].sort()).toEqual([258, 259]);
    expect(tok.encode('hi é')).toEqual([256, byteId(0x20), byteId(0xc3), byteId(0xa9)]);
    expect(tok.decode([256, 259])).toBe('hi<|im_end|>');
    expect(() => tok.decode([257])).toThrow(/257/);
    expect(tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toBe('[user]x');
    const stream = tok.createStream();
    expect(utf8('é🤗').map((b) => stream.push(byteId(b)))).toEqual(['', 'é', '', '', '', '🤗']);
  });

  it('falls back to the bundled tokenizer when the directory has neither file', async () => {
    const dir = path.join(scratch, 'weights-only');
    mkdirSync(dir, { recursive: true });
    const tok = await loadTokenizer({ dir });
    expect(tok.vocabSize).toBe(QWEN3_VOCAB);
  });

  it('names the missing file when only one is present', async () => {
    const onlyJson = path.join(scratch, 'only-json');
    writeTinyTokenizer(onlyJson, {});
    rmSync(path.join(onlyJson, 'tokenizer_config.json'));
    await expect(loadTokenizer({ dir: onlyJson })).rejects.toThrow(
      /has tokenizer\.json but no tokenizer_config\.json/,
    );
    const onlyConfig = path.join(scratch, 'only-config');
    writeTinyTokenizer(onlyConfig, {});
    rmSync(path.join(onlyConfig, 'tokenizer.json'));
    await expect(loadTokenizer({ dir: onlyConfig })).rejects.toThrow(
      /has tokenizer_config\.json but no tokenizer\.json/,
    );
  });

  it('rejects unparsable or wrong-shaped files and missing directories', async () => {
    const broken = path.join(scratch, 'broken');
    writeTinyTokenizer(broken, {});
    writeFileSync(path.join(broken, 'tokenizer_config.json'), '{"chat_template": ');
    await expect(loadTokenizer({ dir: broken })).rejects.toThrow(/tokenizer_config\.json is not valid JSON/);
    writeFileSync(path.join(broken, 'tokenizer_config.json'), '{}');
    writeFileSync(path.join(broken, 'tokenizer.json'), '{"version": "1.0"}');
    await expect(loadTokenizer({ dir: broken })).rejects.toThrow(/no "model.vocab"/);
    await expect(loadTokenizer({ dir: path.join(scratch, 'nope') })).rejects.toThrow(/does not exist/);
  });

  it('reports template errors and missing templates as QkTokenizerError, keeping encode usable', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ chat_template: '{% if %}' }, /does not parse/],
      [{ chat_template: '{{ messages[0].content.no_such_method() }}' }, /failed to render/],
      [{}, /no chat template/],
    ];
    for (const [i, [config, message]] of cases.entries()) {
      const dir = path.join(scratch, `template-${i}`);
      writeTinyTokenizer(dir, config);
      const tok = await loadTokenizer({ dir });
      expect(tok.encode('hi')).toEqual([256]);
      expect(() => tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toThrow(message);
      expect(() => tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toThrow(QkTokenizerError);
    }
  });

  it('reads chat_template.jinja when the config has no template', async () => {
    const dir = path.join(scratch, 'jinja-file');
    writeTinyTokenizer(dir, {});
    writeFileSync(path.join(dir, 'chat_template.jinja'), '{{ messages | length }} message(s)');
    const tok = await loadTokenizer({ dir });
    expect(tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toBe('1 message(s)');
  });
});

describe('finding the bundled data', () => {
  it("finds this package's own tokenizer/ folder by default", () => {
    const files = bundledTokenizerFiles();
    const own = path.resolve(__dirname, '..', 'tokenizer');
    expect(files?.tokenizerJson).toBe(path.join(own, 'tokenizer.json'));
    expect(files?.tokenizerConfig).toBe(path.join(own, 'tokenizer_config.json'));
  });

  it('finds the package folder from a built module in dist/ too, and nothing outside the package', () => {
    const fromDist = locateBundledTokenizer({
      envDir: undefined,
      mainScript: undefined,
      moduleUrl: pathToFileURL(path.resolve(__dirname, '..', 'dist', 'index.js')).href,
    });
    expect(fromDist.files?.tokenizerJson).toBe(path.resolve(__dirname, '..', 'tokenizer', 'tokenizer.json'));
  });

  it('the shipped pair is the full Qwen3 tokenizer with its chat template', async () => {
    const files = bundledTokenizerFiles();
    const tok = await loadTokenizer();
    expect(files).toBeDefined();
    expect(tok.vocabSize).toBeGreaterThan(151_000);
    expect(tok.applyChatTemplate([{ role: 'user', content: 'hi' }])).toContain('<|im_start|>user');
  });

  it('prefers QK_TOKENIZER_DIR, then a tokenizer/ folder beside the main script', () => {
    const envDir = path.join(scratch, 'env');
    writeTinyTokenizer(envDir, {});
    const appDir = path.join(scratch, 'app');
    writeTinyTokenizer(path.join(appDir, 'tokenizer'), {});
    const mainScript = path.join(appDir, 'qk.mjs');
    const link = path.join(scratch, 'qk-link.mjs');
    writeFileSync(mainScript, '');
    symlinkSync(mainScript, link);

    const viaEnv = locateBundledTokenizer({ envDir, mainScript, moduleUrl: undefined });
    expect(viaEnv.files?.tokenizerJson).toBe(path.join(envDir, 'tokenizer.json'));
    const viaScript = locateBundledTokenizer({ envDir: path.join(scratch, 'empty-env'), mainScript: link });
    expect(viaScript.files?.tokenizerConfig).toBe(path.join(appDir, 'tokenizer', 'tokenizer_config.json'));
    expect(viaScript.looked.join('\n')).toMatch(
      /QK_TOKENIZER_DIR=.*empty-env \(no tokenizer\.json, no tokenizer_config/,
    );
  });

  it('loads through QK_TOKENIZER_DIR end to end', async () => {
    const envDir = path.join(scratch, 'env-load');
    writeTinyTokenizer(envDir, {});
    const saved = process.env.QK_TOKENIZER_DIR;
    process.env.QK_TOKENIZER_DIR = envDir;
    try {
      expect((await loadTokenizer()).vocabSize).toBe(260);
    } finally {
      if (saved === undefined) delete process.env.QK_TOKENIZER_DIR;
      else process.env.QK_TOKENIZER_DIR = saved;
    }
  });

  it('lists every place looked when nothing is found', () => {
    const nowhere = path.join(scratch, 'nowhere');
    mkdirSync(nowhere, { recursive: true });
    const inputs = {
      envDir: undefined,
      mainScript: path.join(nowhere, 'main.mjs'),
      moduleUrl: pathToFileURL(path.join(nowhere, 'lib', 'index.js')).href,
    };
    expect(locateBundledTokenizer(inputs).files).toBeUndefined();
    let error: unknown;
    try {
      requireBundledTokenizer(inputs);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(QkTokenizerError);
    const message = (error as Error).message;
    expect(message).toContain('QK_TOKENIZER_DIR (not set)');
    expect(message).toContain(path.join(nowhere, 'tokenizer'));
    expect(message).toContain(path.join(nowhere, 'lib', 'tokenizer'));
    expect(message).toContain(
      `@qk/qwen3/tokenizer (no @qk/qwen3 package.json above ${path.join(nowhere, 'lib')})`,
    );
  });
});

describe('encoding by sections (a chat re-encodes only its new text)', () => {
  /** The library alone, on the same bundled files: the ids `encode` must match. */
  let library: Tokenizer;
  beforeAll(() => {
    const files = bundledTokenizerFiles()!;
    library = new Tokenizer(
      JSON.parse(readFileSync(files.tokenizerJson, 'utf8')),
      JSON.parse(readFileSync(files.tokenizerConfig, 'utf8')),
    );
  });

  it('random texts with added tokens, whitespace runs, digits and non-ASCII give the library ids, cached or not', () => {
    const seed = Math.floor(Math.random() * 1e9);
    const rng = new Rng(seed);
    const atoms = [
      '<|im_start|>',
      '<|im_end|>',
      '<think>',
      '</think>',
      '<tool_call>',
      '<|endoftext|>',
      '<|im_start',
      'im_end|>',
      'hello',
      ' world',
      '  ',
      '\n',
      '\n\n',
      '\t',
      '12345',
      ' 3.14',
      'é',
      '中文',
      '🙂',
      "don't",
      ' ',
      '{"a": [1, 2]}',
      'x'.repeat(300),
      ' the quick brown fox jumps over the lazy dog.',
    ];
    const texts: string[] = [];
    for (let i = 0; i < 60; i++) {
      const n = 1 + rng.nextInt(120);
      texts.push(Array.from({ length: n }, () => atoms[rng.nextInt(atoms.length)]).join(''));
    }
    // Twice over, so the second pass reads sections the first one remembered.
    for (const pass of [1, 2]) {
      for (const text of texts) {
        const expected = library.encode(text, { add_special_tokens: false }).ids;
        expect(qwen.encode(text), `seed ${seed}, pass ${pass}: ${JSON.stringify(text.slice(0, 80))}`).toEqual(
          expected,
        );
      }
    }
  });

  it('a result is the caller’s own: changing it changes no later encoding', () => {
    const text = `<|im_start|>user\n${'a long message that repeats itself '.repeat(20)}<|im_end|>`;
    const first = qwen.encode(text);
    const copy = [...first];
    first.fill(0);
    expect(qwen.encode(text)).toEqual(copy);
  });

  it('a growing chat costs only its new turn (the earlier turns’ sections are kept)', () => {
    const words = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu'.split(' ');
    const say = (n: number, s: number) =>
      Array.from({ length: n }, (_, i) => words[(i * 5 + s) % words.length]).join(' ');
    const messages: ChatMessage[] = [{ role: 'system', content: say(300, 0) }];
    const lengths: number[] = [];
    for (let turn = 1; turn <= 6; turn++) {
      messages.push(
        { role: 'user', content: say(200, turn) },
        { role: 'assistant', content: say(200, turn + 7) },
      );
      const ids = (qwen as unknown as { encodeChat(m: readonly ChatMessage[]): number[] }).encodeChat(
        messages,
      );
      const expected = library.encode(qwen.applyChatTemplate(messages), { add_special_tokens: false }).ids;
      expect(ids).toEqual(expected);
      lengths.push(ids.length);
    }
    expect(lengths[5]).toBeGreaterThan(lengths[0]! * 3);
  });

  it('encodes the same chat twice without rendering it again, and never hands out its kept ids', () => {
    type Encoder = { encodeChat(m: readonly ChatMessage[], o?: object): number[] };
    const enc = qwen as unknown as Encoder;
    const messages: ChatMessage[] = [
      { role: 'user', content: `count ${Math.random()}` },
      { role: 'assistant', content: 'one two' },
      { role: 'user', content: 'again <|im_end|>' },
    ];
    const first = enc.encodeChat(messages, { enableThinking: false });
    const expected = [...first];
    first.push(1, 2, 3);
    first[0] = 7;
    expect(enc.encodeChat(messages, { enableThinking: false })).toEqual(expected);
    // Other options, another message, an edited message: encoded afresh.
    expect(enc.encodeChat(messages, { enableThinking: true })).not.toEqual(expected);
    const edited = messages.map((m, i) => (i === 2 ? { ...m, content: 'again' } : m));
    const fresh = enc.encodeChat(edited, { enableThinking: false });
    expect(fresh).toEqual(
      library.encode(qwen.applyChatTemplate(edited, { enableThinking: false }), { add_special_tokens: false })
        .ids,
    );
    // A message object changed in place after the first call is seen (the key is the content, not the object).
    const same = messages.map((m) => ({ ...m }));
    enc.encodeChat(same, { enableThinking: false });
    (same[1] as { content: string }).content = 'three four';
    expect(enc.encodeChat(same, { enableThinking: false })).not.toEqual(expected);
  });
});
