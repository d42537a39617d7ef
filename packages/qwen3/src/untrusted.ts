/**
 * Budgets for untrusted input: files from a model directory are read only when they are regular files of a sane
 * size, JSON is checked for nesting depth before it is parsed, and every value echoed into an error message is cut
 * and has its control characters escaped, so a hostile file can neither crash the parser's recursion, exhaust
 * memory, block on a FIFO, nor write escape sequences to the user's terminal.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, readlink, stat } from 'node:fs/promises';
import { QkLimitError } from './errors.js';

/** The limits applied to untrusted input. Each is named in the error it gives. */
export const LIMITS = Object.freeze({
  /** Deepest nesting of arrays and objects in any JSON file (HF files nest fewer than 10 levels). */
  jsonDepth: 64,
  /** `config.json`, `generation_config.json`. */
  configBytes: 4 << 20,
  /** `tokenizer_config.json`, `model.safetensors.index.json`. */
  mediumJsonBytes: 64 << 20,
  /** `tokenizer.json` (Qwen3's is 11 MB; the largest hub tokenizers about 35 MB). */
  tokenizerJsonBytes: 256 << 20,
  /** Tensors in one safetensors file, or in one checkpoint (Qwen3-32B has 707). */
  tensors: 65_536,
  /** Dimensions of one tensor. */
  tensorRank: 8,
  /** Characters of a value quoted in an error message. */
  echoChars: 200,
  /** Chat-template evaluation steps (expressions and statements) per render. */
  templateSteps: 5_000_000,
  /**
   * Elements `range()` may produce across one render: far above what a chat template walks (messages, tools), and
   * low enough that loops with empty bodies — which evaluate no statement, so no step is counted — end within
   * about a second.
   */
  templateRange: 100_000,
  /** Characters of any string a chat template builds, its output included. */
  templateOutputChars: 16 << 20,
  /** Wall-clock milliseconds of one chat-template render. */
  templateMs: 5_000,
});

/** Code points shown escaped: C0 and C1 controls, DEL, and the bidirectional overrides that can disguise text. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

function escapeChar(c: string): string {
  const code = c.codePointAt(0)!;
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` made safe to print in an error: control characters escaped (`\x1b`, `\n`, …) and cut to `max` characters
 * with a note of how many were left out.
 */
export function safeText(text: string, max: number = LIMITS.echoChars): string {
  const cut = text.length > max ? text.slice(0, max) : text;
  const escaped = cut.replace(UNSAFE, escapeChar);
  return text.length > max ? `${escaped}… (${text.length - max} more characters)` : escaped;
}

/** `text` quoted for an error message: `"…"`, escaped and cut as {@link safeText}. */
export function quote(text: string, max: number = LIMITS.echoChars): string {
  return `"${safeText(
    text.replace(/["\\]/g, (c) => `\\${c}`),
    max,
  )}"`;
}

/**
 * A short, safe rendering of any value for an error message: JSON-like, at most `max` characters, nested values
 * beyond a few levels shown as `[…]` / `{…}`. Never recursive beyond that depth, so a value nested 100,000 levels
 * deep cannot overflow the stack, and never longer than `max`, so a huge value cannot flood the terminal.
 */
export function describeValue(value: unknown, max: number = LIMITS.echoChars): string {
  let out = '';
  const room = () => out.length < max;
  const walk = (v: unknown, depth: number): void => {
    if (!room()) return;
    if (typeof v === 'string') {
      out += JSON.stringify(v.length > max ? v.slice(0, max) : v);
      return;
    }
    if (typeof v === 'number' || typeof v === 'boolean' || v === null) {
      out += String(v);
      return;
    }
    if (v === undefined) {
      out += 'undefined';
      return;
    }
    if (Array.isArray(v)) {
      if (depth >= 3) {
        out += v.length === 0 ? '[]' : '[…]';
        return;
      }
      out += '[';
      for (let i = 0; i < v.length && room(); i++) {
        if (i > 0) out += ',';
        walk(v[i], depth + 1);
      }
      out += ']';
      return;
    }
    if (typeof v === 'object') {
      const keys = Object.keys(v as object);
      if (depth >= 3) {
        out += keys.length === 0 ? '{}' : '{…}';
        return;
      }
      out += '{';
      for (let i = 0; i < keys.length && room(); i++) {
        if (i > 0) out += ',';
        out += `${JSON.stringify(keys[i]!.slice(0, max))}:`;
        walk((v as Record<string, unknown>)[keys[i]!], depth + 1);
      }
      out += '}';
      return;
    }
    out += typeof v;
  };
  walk(value, 0);
  return safeText(out, max);
}

/**
 * Throws {@link QkLimitError} when `text` (JSON) nests arrays and objects deeper than `maxDepth`, naming the key
 * path where it did. A linear scan that allocates nothing per level, run before `JSON.parse` so that nothing
 * recursive ever sees such a value.
 */
export function checkJsonDepth(text: string, file: string, maxDepth: number = LIMITS.jsonDepth): void {
  // Per open container: whether it is an object, and the last key read in it (for the error's key path).
  const isObject: boolean[] = [];
  const keys: (string | number)[] = [];
  const counts: number[] = [];
  let lastString = '';
  let expectKey = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const begin = i + 1;
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      if (expectKey) lastString = text.slice(begin, Math.min(i, begin + 100));
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (isObject.length >= maxDepth) {
        const path = keys
          .slice(0, 8)
          .map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`))
          .join('');
        throw new QkLimitError(
          file,
          `${path.length > 0 ? path.slice(path.startsWith('.') ? 1 : 0) : '(top level)'}${keys.length > 8 ? '…' : ''}`,
          `JSON nesting depth ${maxDepth}`,
          `nests arrays/objects more than ${maxDepth} levels deep`,
        );
      }
      isObject.push(c === 0x7b);
      keys.push(c === 0x7b ? '' : 0);
      counts.push(0);
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      isObject.pop();
      keys.pop();
      counts.pop();
      expectKey = false;
    } else if (c === 0x3a /* : */) {
      if (isObject.length > 0) keys[keys.length - 1] = safeText(lastString, 40);
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      const top = isObject.length - 1;
      if (top >= 0) {
        if (isObject[top]) expectKey = true;
        else keys[top] = ++counts[top]!;
      }
    }
  }
}

/** How a file of a model directory stands before it is opened. */
export type FileKind = 'file' | 'dir' | 'missing' | 'dangling-link' | 'other';

/** What {@link inspectPath} found, with the `stat` of a regular file or directory. */
export interface PathInfo {
  readonly kind: FileKind;
  readonly stats?: Stats;
  /** The link's target, for a dangling symbolic link. */
  readonly target?: string;
  /** For `other`: `a FIFO`, `a socket`, `a device`. */
  readonly what?: string;
}

function describeSpecial(s: Stats): string {
  if (s.isFIFO()) return 'a FIFO (named pipe)';
  if (s.isSocket()) return 'a socket';
  if (s.isCharacterDevice() || s.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** Looks at `path` without opening it: a regular file, a directory, missing, a dangling symlink, or something else. */
export async function inspectPath(path: string): Promise<PathInfo> {
  let link: Stats;
  try {
    link = await lstat(path);
  } catch {
    return { kind: 'missing' };
  }
  let s: Stats;
  try {
    s = link.isSymbolicLink() ? await stat(path) : link;
  } catch {
    const target = await readlink(path).catch(() => '?');
    return { kind: 'dangling-link', target };
  }
  if (s.isFile()) return { kind: 'file', stats: s };
  if (s.isDirectory()) return { kind: 'dir', stats: s };
  return { kind: 'other', stats: s, what: describeSpecial(s) };
}

/** A sentence on why `path` cannot be read, for kinds other than `file`. */
export function notReadableReason(info: PathInfo): string {
  switch (info.kind) {
    case 'missing':
      return 'does not exist';
    case 'dangling-link':
      return `is a symbolic link to ${quote(info.target ?? '?')}, which does not exist`;
    case 'dir':
      return 'is a directory, not a regular file';
    default:
      return `is ${info.what ?? 'not a regular file'}; only regular files are read`;
  }
}

/**
 * Reads a regular file of at most `maxBytes` bytes as UTF-8. It is checked with `stat` first and opened with
 * `O_NONBLOCK`, so a FIFO or device never blocks; a file that grows past `maxBytes` while being read is refused.
 *
 * @returns the text, or `undefined` when the file does not exist.
 * @throws QkLimitError when the file is too big; `fail(reason)` for anything else that is not a readable file.
 */
export async function readRegularFile(
  path: string,
  maxBytes: number,
  fail: (reason: string) => Error,
): Promise<string | undefined> {
  const info = await inspectPath(path);
  if (info.kind === 'missing') return undefined;
  if (info.kind !== 'file') throw fail(notReadableReason(info));
  const tooBig = (size: number) =>
    new QkLimitError(path, '(file size)', `${maxBytes} bytes`, `has ${size} bytes`);
  if (info.stats!.size > maxBytes) throw tooBig(info.stats!.size);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw fail(`cannot be opened (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  try {
    const s = await handle.stat();
    if (!s.isFile()) throw fail(`is ${describeSpecial(s)}; only regular files are read`);
    if (s.size > maxBytes) throw tooBig(s.size);
    const buffer = Buffer.alloc(Math.min(maxBytes + 1, s.size + 1));
    let done = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, done, buffer.length - done, done);
      if (bytesRead === 0) break;
      done += bytesRead;
      if (done > maxBytes) throw tooBig(done);
      if (done === buffer.length) break;
    }
    return buffer.toString('utf8', 0, done);
  } finally {
    await handle.close();
  }
}

/** A `JSON.parse` error message without the quoted file contents newer V8 versions put into it. */
export function jsonErrorMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return safeText(message.replace(/,\s*".*"\s+is not valid JSON$/s, ' (not valid JSON)'), 120);
}

/**
 * Reads and parses an untrusted JSON file under the size and depth budgets.
 *
 * @returns the parsed value, or `undefined` when the file does not exist.
 * @throws QkLimitError for a budget; `fail(reason)` when it is not a regular file or not JSON.
 */
export async function readUntrustedJson(
  path: string,
  maxBytes: number,
  fail: (reason: string) => Error,
): Promise<unknown> {
  const text = await readRegularFile(path, maxBytes, fail);
  if (text === undefined) return undefined;
  return parseUntrustedJson(text, path, fail);
}

/** `JSON.parse` after {@link checkJsonDepth}; `fail(reason)` for invalid JSON. */
export function parseUntrustedJson(text: string, file: string, fail: (reason: string) => Error): unknown {
  checkJsonDepth(text, file);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fail(`is not valid JSON (${jsonErrorMessage(e)})`);
  }
}

/**
 * Why the regular expression `source` could backtrack without bound, or `undefined` when it cannot by qk's rule: no
 * group that holds a quantifier or an alternation may itself be repeated (`(a+)+`, `(a|aa)*`, `(\w+\s?)*`), and no
 * backreference may appear. Every tokenizer regex on the hub (GPT-2, Llama 3, Qwen) passes; the classic
 * catastrophic patterns do not.
 */
export function unboundedBacktracking(source: string): string | undefined {
  // Per open group: whether its body holds a quantifier or an alternation.
  const stack: boolean[] = [];
  let lastGroupRisky = false;
  let afterGroup = false;
  const n = source.length;
  for (let i = 0; i < n; i++) {
    const c = source[i]!;
    let quantifier = false;
    let repeats = false;
    if (c === '\\') {
      const next = source[i + 1] ?? '';
      if (/[1-9]/.test(next) || next === 'k') return 'it uses a backreference';
      i++;
      afterGroup = false;
      continue;
    }
    if (c === '[') {
      i++;
      if (source[i] === '^') i++;
      if (source[i] === ']') i++;
      while (i < n && source[i] !== ']') i += source[i] === '\\' ? 2 : 1;
      afterGroup = false;
      continue;
    }
    if (c === '(') {
      stack.push(false);
      if (source[i + 1] === '?') {
        // Skip the group's marker: (?: (?= (?! (?<= (?<! (?<name> (?i: (?i-m:
        const m = /^\(\?(?:[:=!]|<[=!]|<[^>]*>|[a-zA-Z-]*:)/.exec(source.slice(i, i + 64));
        if (m) i += m[0].length - 1;
      }
      afterGroup = false;
      continue;
    }
    if (c === ')') {
      lastGroupRisky = stack.pop() ?? false;
      if (lastGroupRisky && stack.length > 0) stack[stack.length - 1] = true;
      afterGroup = true;
      continue;
    }
    if (c === '|') {
      if (stack.length > 0) stack[stack.length - 1] = true;
      afterGroup = false;
      continue;
    }
    if (c === '*' || c === '+') {
      quantifier = true;
      repeats = true;
    } else if (c === '?') {
      quantifier = true;
    } else if (c === '{') {
      const m = /^\{(\d*)(,?)(\d*)\}/.exec(source.slice(i, i + 24));
      if (m) {
        quantifier = true;
        repeats = m[2] === ',' ? m[3] === '' || Number(m[3]) > 1 : Number(m[1]) > 1;
        i += m[0].length - 1;
      }
    }
    if (quantifier) {
      if (afterGroup && repeats && lastGroupRisky) {
        return 'a repeated group holds a quantifier or an alternation (as in (a+)+ or (a|aa)*), which can backtrack exponentially';
      }
      if (stack.length > 0) stack[stack.length - 1] = true;
      // A lazy or possessive marker after the quantifier is part of it.
      if (source[i + 1] === '?' || source[i + 1] === '+') i++;
      afterGroup = false;
      continue;
    }
    afterGroup = false;
  }
  return undefined;
}
