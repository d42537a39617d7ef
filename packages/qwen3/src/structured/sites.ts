/**
 * Strings of bounded length without a grammar position per count.
 *
 * xgrammar builds a token mask for every position of a grammar when it compiles it, each a walk of the whole
 * vocabulary (~15–20 ms with Qwen3's 151,936 pieces over free characters). A string of at most n characters is n
 * positions, one per count left, so `maxLength: 24` took ~480 ms. Here such a string (a *length site*) goes to
 * xgrammar with its repetition unbounded, one loop state, and the count is kept by the constraint:
 *
 * - Each site's rule lets a *mark*, a control character that no JSON string holds, stand before every character
 *   (ebnf.ts, `lengthSiteEbnf`). After each token the constraint offers the mark's single-byte token to the matcher
 *   and takes it back: only inside that site's string is it taken. A second control character that no site uses is
 *   tried first: free text (a thinking block, text around tool calls) takes any character, and there no site holds.
 * - The characters written since the last `"` are the string's so far (a site's content holds no quote). Each
 *   piece's characters before its first quote and after its last are counted once per vocabulary (UTF-8 lead bytes:
 *   a character split across pieces counts where it starts).
 * - Inside a site, xgrammar's mask is narrowed to the pieces that keep the count within the site's bounds: without
 *   a quote, at most the characters left; with one, the string ends there, so at least the fewest left too. Pieces
 *   holding a control character or a backslash before their first quote never stay (no site's content has either;
 *   that drops the marks).
 * - A piece may open a site inside it (` "abcdefgh`, `", "x`): pieces whose text after a quote could break some
 *   site's bounds are spelt on the matcher byte by byte up to each quote when a mask allows them, to see whether
 *   that quote opened a site (constraint.ts).
 * So the masks equal those of the bounded grammar (tested step by step against it).
 *
 * The same per-piece table gives every constraint its UTF-8 masks (`utf8Mask`): xgrammar takes bytes that are not
 * UTF-8, which decode to U+FFFD.
 */
import type { TokenVocabulary } from '../tokenizer/vocabulary.js';
import type { LengthSiteShape } from './ebnf.js';

/** The control character tried first: taken only in free text (see the file comment). */
const FREE_TEXT_BYTE = 0x01;

/**
 * Control characters a site may use as its mark: all but NUL, the free-text probe, tab, newline and carriage return
 * (those three are written in free text often, and are the ones a grammar is most likely to spell out).
 */
const MARK_BYTES: readonly number[] = Array.from({ length: 0x20 }, (_, b) => b).filter(
  (b) => b > FREE_TEXT_BYTE && b !== 0x09 && b !== 0x0a && b !== 0x0d,
);

/** Site masks kept per vocabulary (keyed by the counts left). */
const KEPT_MASKS = 256;

/** Counts of characters left below which a site mask is ORed from per-count bitsets (2 × 64 × 19 KB for Qwen3). */
const CUMULATIVE = 64;

/** {@link SiteTable}'s leading-continuation count of a piece that spells no bytes. */
const UNKNOWN = 5;
/** Leading count of a piece whose own bytes break UTF-8. */
const BROKEN = 4;

/** The range the next byte must fall in, by the lead byte's kind (see {@link utf8After}). */
const NEXT_RANGES: readonly (readonly [number, number])[] = [
  [0x80, 0xbf],
  [0xa0, 0xbf], // after E0: no overlong 3-byte forms
  [0x80, 0x9f], // after ED: no surrogates
  [0x90, 0xbf], // after F0: no overlong 4-byte forms
  [0x80, 0x8f], // after F4: nothing past U+10FFFF
];

/**
 * The UTF-8 state after `bytes` follow state `state`: continuation bytes still missing (0–3) in the low 2 bits, and
 * which range the next one must fall in (an index of NEXT_RANGES) above them. Invalid bytes leave state 0 (the masks
 * never allow them; this only has to be right for text they allowed).
 */
export function utf8After(state: number, bytes: Uint8Array | undefined): number {
  let missing = state & 3;
  let range = state >> 2;
  for (const b of bytes ?? []) {
    if ((b & 0xc0) === 0x80 && missing > 0) {
      missing--;
      range = 0;
    } else if (b >= 0xc2 && b <= 0xdf) [missing, range] = [1, 0];
    else if (b >= 0xe0 && b <= 0xef) [missing, range] = [2, b === 0xe0 ? 1 : b === 0xed ? 2 : 0];
    else if (b >= 0xf0 && b <= 0xf4) [missing, range] = [3, b === 0xf0 ? 3 : b === 0xf4 ? 4 : 0];
    else [missing, range] = [0, 0];
  }
  return missing === 0 ? 0 : missing | (range << 2);
}

/** Continuation bytes that finish the character UTF-8 state `state` leaves open (none when it is whole). */
export function utf8Completion(state: number): Uint8Array {
  const missing = state & 3;
  if (missing === 0) return new Uint8Array(0);
  const out = new Uint8Array(missing).fill(0x80);
  out[0] = NEXT_RANGES[state >> 2]![0];
  return out;
}

/**
 * Continuation bytes at the start of `bytes` (0–3), or BROKEN when what follows them is not UTF-8 (a bad lead byte,
 * a character cut short inside the piece, a surrogate, an overlong form, past U+10FFFF); a character left unfinished
 * at the end is fine.
 */
function leadingContinuations(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length && (bytes[i]! & 0xc0) === 0x80) i++;
  if (i > 3) return BROKEN;
  let state = 0;
  for (let j = i; j < bytes.length; j++) {
    const b = bytes[j]!;
    const missing = state & 3;
    if (missing > 0) {
      const [lo, hi] = NEXT_RANGES[state >> 2]!;
      if (b < lo || b > hi) return BROKEN;
    } else if ((b & 0xc0) === 0x80 || b === 0xc0 || b === 0xc1 || b > 0xf4) return BROKEN;
    state = utf8After(state, Uint8Array.of(b));
  }
  return i;
}

const QUOTE = 1;
/** A control character or backslash before the first quote, or a piece that spells no bytes: never in a site. */
const BAD = 2;
/** Every byte below 0x80: the piece leaves whole characters whole. */
const ASCII = 4;

/** Per-piece counts for one vocabulary and model size, and the single-byte ids of every byte. */
export class SiteTable {
  /** Characters before the first `"`, or of the whole piece without one. */
  readonly #head: Uint16Array;
  /** Characters after the last `"`. */
  readonly #tail: Uint16Array;
  /** The longest stretch of characters after a `"` (up to the next one or the end). */
  readonly #longest: Uint16Array;
  /** The shortest stretch between two `"` (0xffff: fewer than two). */
  readonly #shortest: Uint16Array;
  readonly #flags: Uint8Array;
  /** Leading continuation bytes (0–3; 4: more, or the piece's own bytes are not UTF-8: never allowed). */
  readonly #leading: Uint8Array;
  /** The piece's first byte. */
  readonly #first: Uint8Array;
  readonly #utf8Masks = new Map<number, Uint32Array>();
  /** The id of each byte's single-byte piece, -1 where the vocabulary has none. */
  readonly #byteIds = new Int32Array(256).fill(-1);
  readonly #masks = new Map<number, Uint32Array>();
  #byCount: { plain: Uint32Array[]; quoted: Uint32Array[] } | undefined;
  readonly #risky = new Map<number, Uint32Array>();
  readonly #pieces: readonly string[];
  readonly #toBytes: (piece: string) => Uint8Array | undefined;
  readonly vocabSize: number;

  constructor(vocabulary: TokenVocabulary, vocabSize: number) {
    this.vocabSize = vocabSize;
    this.#pieces = vocabulary.pieces;
    this.#toBytes = pieceDecoder(vocabulary.encoding);
    this.#head = new Uint16Array(vocabSize);
    this.#tail = new Uint16Array(vocabSize);
    this.#longest = new Uint16Array(vocabSize);
    this.#shortest = new Uint16Array(vocabSize).fill(0xffff);
    this.#flags = new Uint8Array(vocabSize).fill(BAD);
    this.#leading = new Uint8Array(vocabSize).fill(UNKNOWN);
    this.#first = new Uint8Array(vocabSize);
    const n = Math.min(vocabSize, vocabulary.pieces.length);
    for (let id = 0; id < n; id++) {
      const bytes = this.bytes(id);
      if (bytes === undefined || bytes.length === 0) continue;
      this.#leading[id] = leadingContinuations(bytes);
      this.#first[id] = bytes[0]!;
      if (bytes.length === 1 && this.#byteIds[bytes[0]!]! < 0) this.#byteIds[bytes[0]!] = id;
      let head = 0;
      let run = 0;
      let quotes = 0;
      let bad = false;
      let longest = 0;
      let shortest = 0xffff;
      for (const b of bytes) {
        if (b === 0x22) {
          if (quotes > 0) {
            longest = Math.max(longest, run);
            shortest = Math.min(shortest, run);
          }
          quotes++;
          run = 0;
          continue;
        }
        if ((b & 0xc0) === 0x80) continue; // a continuation byte: its character was counted at its lead byte
        if (quotes === 0) {
          if (b < 0x20 || b === 0x5c) bad = true;
          head++;
        } else run++;
      }
      this.#head[id] = Math.min(head, 0xffff);
      this.#tail[id] = Math.min(run, 0xffff);
      this.#longest[id] = quotes > 0 ? Math.min(Math.max(longest, run), 0xffff) : 0;
      this.#shortest[id] = shortest;
      this.#flags[id] =
        (quotes > 0 ? QUOTE : 0) | (bad ? BAD : 0) | (bytes.every((b) => b < 0x80) ? ASCII : 0);
    }
  }

  /** The bytes piece `id` spells, or `undefined`. */
  bytes(id: number): Uint8Array | undefined {
    const piece = this.#pieces[id];
    return piece === undefined || piece === '' ? undefined : this.#toBytes(piece);
  }

  /** The id of byte `b`'s single-byte piece, or -1. */
  byteId(b: number): number {
    return this.#byteIds[b] ?? -1;
  }

  /** Whether every byte has a single-byte piece: the constraint spells a piece's text through them. */
  get spellsEveryByte(): boolean {
    return this.#byteIds.every((id) => id >= 0);
  }

  /** The control characters available as marks, with their pieces' ids. */
  markBytes(): { byte: number; id: number }[] {
    return MARK_BYTES.map((byte) => ({ byte, id: this.#byteIds[byte]! }));
  }

  /**
   * The pieces that may follow text in UTF-8 state `state` (see {@link utf8After}) without making it invalid UTF-8:
   * xgrammar 0.1.27 takes surrogates (`ED A0 80`) and bytes that break a character, which decode to U+FFFD — three
   * characters where the grammar counted one, so a `maxLength` string could fail its schema. Pieces that spell no
   * bytes (a tokenizer's added pieces outside its alphabet) are left to the grammar after whole characters.
   */
  utf8Mask(state: number): Uint32Array {
    const kept = this.#utf8Masks.get(state);
    if (kept !== undefined) return kept;
    const missing = state & 3;
    const [lo, hi] = NEXT_RANGES[state >> 2]!;
    const mask = this.#maskOf((id) => {
      const leading = this.#leading[id]!;
      if (leading === UNKNOWN || missing === 0)
        return missing === 0 && (leading === UNKNOWN || leading === 0);
      return (
        leading > 0 &&
        leading <= missing &&
        (leading === missing || leading === this.#length(id)) &&
        this.#first[id]! >= lo &&
        this.#first[id]! <= hi
      );
    });
    this.#utf8Masks.set(state, mask);
    return mask;
  }

  /** Builds {@link utf8Mask} for every state text can be in (a few ms each): after each kind of lead byte. */
  warmUtf8(): void {
    for (const lead of [0xc2, 0xe0, 0xe1, 0xed, 0xf0, 0xf1, 0xf4])
      this.utf8Mask(utf8After(0, Uint8Array.of(lead)));
  }

  #length(id: number): number {
    return this.bytes(id)?.length ?? 0;
  }

  /** Whether piece `id` spells ASCII bytes only. */
  isAscii(id: number): boolean {
    return id >= 0 && id < this.vocabSize && (this.#flags[id]! & ASCII) !== 0;
  }

  /** Whether piece `id` holds a quote. */
  hasQuote(id: number): boolean {
    return id >= 0 && id < this.vocabSize && (this.#flags[id]! & QUOTE) !== 0;
  }

  /** The characters written since the last quote, after `id` follows `since` of them. */
  advance(since: number, id: number): number {
    if (id < 0 || id >= this.vocabSize) return 0;
    return (this.#flags[id]! & QUOTE) !== 0 ? this.#tail[id]! : Math.min(since + this.#head[id]!, 1 << 30);
  }

  /**
   * The pieces that keep a site's count within bounds when `least` to `most` more characters may come (either may
   * be negative: no fewest; nothing more but the quote): without a quote, at most `most` characters; with one, `least`
   * to `most` before it. Kept per vocabulary, most recently used last.
   */
  lengthMask(least: number, most: number): Uint32Array {
    // Counts are kept to 16 bits: past 0xffff every bound means the same as 0x10000.
    const lo = Math.min(Math.max(0, least), 0x10000);
    const hi = Math.min(Math.max(0, most), 0x10000);
    return this.#kept(this.#masks, lo * 0x10001 + hi, () => {
      if (hi >= CUMULATIVE) {
        return this.#maskOf((id) => {
          const f = this.#flags[id]!;
          const h = this.#head[id]!;
          return (f & BAD) === 0 && h <= hi && ((f & QUOTE) === 0 || h >= lo);
        });
      }
      // Three passes over the words: a decode step meets a new count of characters left every few tokens.
      const { plain, quoted } = this.#cumulative();
      const words = plain[hi]!;
      const upTo = quoted[hi]!;
      const below = lo > 0 ? quoted[lo - 1]! : undefined;
      const mask = new Uint32Array(words.length);
      for (let i = 0; i < mask.length; i++) mask[i] = words[i]! | (upTo[i]! & ~(below?.[i] ?? 0));
      return mask;
    });
  }

  /**
   * For each count h below CUMULATIVE, the usable pieces without a quote of at most h characters (`plain[h]`), and
   * those with one and at most h characters before it (`quoted[h]`); built once per vocabulary (~20 ms).
   */
  #cumulative(): { plain: Uint32Array[]; quoted: Uint32Array[] } {
    if (this.#byCount !== undefined) return this.#byCount;
    const words = Math.ceil(this.vocabSize / 32);
    const plain = Array.from({ length: CUMULATIVE }, () => new Uint32Array(words));
    const quoted = Array.from({ length: CUMULATIVE }, () => new Uint32Array(words));
    for (let id = 0; id < this.vocabSize; id++) {
      const f = this.#flags[id]!;
      const h = this.#head[id]!;
      if ((f & BAD) !== 0 || h >= CUMULATIVE) continue;
      ((f & QUOTE) !== 0 ? quoted : plain)[h]![id >>> 5]! |= 1 << (id & 31);
    }
    for (let h = 1; h < CUMULATIVE; h++) {
      for (let i = 0; i < words; i++) {
        plain[h]![i]! |= plain[h - 1]![i]!;
        quoted[h]![i]! |= quoted[h - 1]![i]!;
      }
    }
    this.#byCount = { plain, quoted };
    return this.#byCount;
  }

  /**
   * The pieces whose text after a quote could break a site's bounds, if that quote opened one: a stretch after a
   * quote longer than `fewestMost` (the smallest `hi` of the grammar's sites), or one between two quotes shorter
   * than `mostFewest` (the largest `lo`) or longer than `fewestMost`. The constraint spells those out on the matcher
   * when its mask allows them (few with the usual bounds).
   */
  riskyMask(fewestMost: number, mostFewest: number): Uint32Array {
    // Stretches are kept to 16 bits (0xffff in `#shortest`: no closed stretch), so the bounds are too.
    const most = Math.min(fewestMost, 0xffff);
    const fewest = Math.min(mostFewest, 0xffff);
    return this.#kept(this.#risky, most * 0x10000 + fewest, () =>
      this.#maskOf(
        (id) =>
          (this.#flags[id]! & QUOTE) !== 0 && (this.#longest[id]! > most || this.#shortest[id]! < fewest),
      ),
    );
  }

  /** The mask of the ids `allows` holds for. */
  #maskOf(allows: (id: number) => boolean): Uint32Array {
    const mask = new Uint32Array(Math.ceil(this.vocabSize / 32));
    for (let id = 0; id < this.vocabSize; id++) if (allows(id)) mask[id >>> 5]! |= 1 << (id & 31);
    return mask;
  }

  /** `cache`'s mask for `key`, built by `build` when absent; the KEPT_MASKS most recently used stay. */
  #kept(cache: Map<number, Uint32Array>, key: number, build: () => Uint32Array): Uint32Array {
    const kept = cache.get(key);
    if (kept !== undefined) {
      cache.delete(key);
      cache.set(key, kept);
      return kept;
    }
    const mask = build();
    cache.set(key, mask);
    if (cache.size > KEPT_MASKS) cache.delete(cache.keys().next().value!);
    return mask;
  }
}

/** The bytes each piece spells, by the vocabulary's encoding; `undefined` for a piece that spells none. */
function pieceDecoder(encoding: TokenVocabulary['encoding']): (piece: string) => Uint8Array | undefined {
  const utf8 = new TextEncoder();
  if (encoding === 'raw') return (piece) => utf8.encode(piece);
  if (encoding === 'byte_fallback') {
    return (piece) => {
      const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
      if (byte !== null) return Uint8Array.of(Number.parseInt(byte[1]!, 16));
      return utf8.encode(piece.replace(/\u2581/g, ' '));
    };
  }
  // GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the others for U+0100 upwards.
  const byChar = new Map<number, number>();
  let next = 0x100;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byChar.set(printable ? b : next++, b);
  }
  return (piece) => {
    const out = new Uint8Array(piece.length);
    for (let i = 0; i < piece.length; i++) {
      const b = byChar.get(piece.charCodeAt(i));
      if (b === undefined) return undefined;
      out[i] = b;
    }
    return out;
  };
}

const tables = new WeakMap<TokenVocabulary, Map<number, SiteTable>>();

/** The {@link SiteTable} of `vocabulary` at `vocabSize` rows, built once (~0.1 s for Qwen3's vocabulary). */
export function siteTable(vocabulary: TokenVocabulary, vocabSize: number): SiteTable {
  let bySize = tables.get(vocabulary);
  if (bySize === undefined) {
    bySize = new Map();
    tables.set(vocabulary, bySize);
  }
  let table = bySize.get(vocabSize);
  if (table === undefined) {
    table = new SiteTable(vocabulary, vocabSize);
    bySize.set(vocabSize, table);
  }
  return table;
}

/** A site of a compiled grammar: its mark's piece and the bounds of its content's count. */
export interface LengthSite {
  readonly markId: number;
  readonly lo: number;
  readonly hi: number;
}

/** What a constraint needs to keep a compiled grammar's sites (see the file comment). */
export interface CompiledSites {
  readonly table: SiteTable;
  readonly freeTextId: number;
  readonly sites: readonly LengthSite[];
  /** {@link SiteTable.riskyMask} for these sites' bounds. */
  readonly risky: Uint32Array;
}

/**
 * Hands out marks to the sites of one grammar being compiled: one per distinct shape, so a shape used in several
 * places shares one mark (its bounds are the same everywhere); `undefined` once the marks run out (the caller then
 * writes that string's count into the grammar).
 */
export class SiteMarks {
  readonly #table: SiteTable;
  readonly #free: number;
  readonly #available: { byte: number; id: number }[];
  readonly #byShape = new Map<string, { byte: number; site: LengthSite }>();

  private constructor(table: SiteTable, free: number) {
    this.#table = table;
    this.#free = free;
    this.#available = table.markBytes();
  }

  /** Marks for `table`'s vocabulary, or `undefined` when it lacks a single-byte piece for some byte. */
  static for(table: SiteTable): SiteMarks | undefined {
    return table.spellsEveryByte ? new SiteMarks(table, table.byteId(FREE_TEXT_BYTE)) : undefined;
  }

  /** The mark byte of `shape`'s sites, or `undefined` when none is left. */
  markFor(shape: LengthSiteShape): number | undefined {
    const key = JSON.stringify(shape);
    const known = this.#byShape.get(key);
    if (known !== undefined) return known.byte;
    const next = this.#available[this.#byShape.size];
    if (next === undefined) return undefined;
    this.#byShape.set(key, { byte: next.byte, site: { markId: next.id, lo: shape.lo, hi: shape.hi } });
    return next.byte;
  }

  /** The sites handed out, or `undefined` when there are none. */
  compiled(): CompiledSites | undefined {
    if (this.#byShape.size === 0) return undefined;
    const sites = [...this.#byShape.values()].map((s) => s.site);
    return {
      table: this.#table,
      freeTextId: this.#free,
      sites,
      risky: this.#table.riskyMask(Math.min(...sites.map((s) => s.hi)), Math.max(...sites.map((s) => s.lo))),
    };
  }
}
