/**
 * A {@link TokenConstraint} backed by an xgrammar matcher: the pushdown automaton of a compiled grammar, advanced
 * one token at a time, that answers "which ids may come next" as a bitset over the model's vocabulary.
 *
 * xgrammar's JavaScript API hands masks out through a promise (it awaits its own lazy initialisation first), while a
 * generation asks for the next mask synchronously. So after each accepted token the next mask is requested at
 * once: the generation yields to the event loop between steps, and by the time it asks, the mask has arrived
 * (measured: well under a millisecond for Qwen3's 151,936 ids). Should it ask earlier, the mask is read through the
 * matcher's synchronous call instead (slower, element by element, but the same mask), so the answer never depends
 * on timing. {@link GrammarConstraint.ready} lets a caller wait for the fast path explicitly.
 *
 * Each of xgrammar's masks is narrowed before use: to the pieces that keep the text UTF-8, and inside a string of
 * bounded length (a length site, whose count the grammar leaves to us) to the pieces within its bounds (sites.ts).
 */
import type { GrammarMatcher } from '@mlc-ai/web-xgrammar';
import { QkValueError } from '@qk/ops';
import { maskAllows, maskWords, type TokenConstraint } from '../generation/constraint.js';
import type { Compiled } from './grammar.js';
import { type CompiledSites, type LengthSite, type SiteTable, utf8After, utf8Completion } from './sites.js';

/** The synchronous parts of xgrammar's matcher binding (present on every 0.1.x build). */
interface MatcherBinding {
  GetNextTokenBitmask(vocabSize: number): {
    size(): number;
    get(i: number): number;
    delete(): void;
  };
}

/** Frees a matcher's WebAssembly memory once the constraint that owned it is unreachable. */
const matchers = new FinalizationRegistry<GrammarMatcher>((matcher) => {
  try {
    matcher.dispose();
  } catch {
    // The matcher's runtime was retired after an abort; its memory goes with it.
  }
});

/** A stateful constraint for one generation. Create it with {@link GrammarConstraint.create}. */
export class GrammarConstraint implements TokenConstraint {
  readonly #matcher: GrammarMatcher;
  readonly #vocabSize: number;
  /** Bits of the stop ids, to tell "only a stop token may follow" (complete) from "more may follow". */
  readonly #stopMask: Uint32Array;
  readonly #label: string;
  /** One stop id, to probe whether the text may end here (see `#canEnd`). */
  readonly #stopId: number | undefined;
  #mask: Uint32Array | undefined;
  #onlyStops = false;
  /** Counts accepted tokens, so a mask requested for an earlier state is never used for a later one. */
  #state = 0;
  #pending: Promise<void> | undefined;
  /** Masks served by the prefetch and by the synchronous fallback (see the file comment). */
  #served = { prefetched: 0, synchronous: 0 };
  /** The grammar's length sites (sites.ts), if it has any. */
  readonly #sites: CompiledSites | undefined;
  /** Characters written since the last quote: a site's content so far. */
  #sinceQuote = 0;
  /** Inside a length site: the pieces that keep its count in bounds, ANDed into the current state's mask. */
  #lengthMask: Uint32Array | undefined;
  /** The length site the matcher is in, if any. */
  #site: LengthSite | undefined;
  /** The text's UTF-8 state (`utf8After`): pieces may end inside a character. */
  #utf8 = 0;
  readonly #pieces: SiteTable;

  private constructor(matcher: GrammarMatcher, compiled: Compiled, label: string) {
    this.#matcher = matcher;
    this.#vocabSize = compiled.vocabSize;
    this.#label = label;
    this.#sites = compiled.sites;
    this.#pieces = compiled.pieces;
    this.#stopId = compiled.stopIds.find((id) => id < compiled.vocabSize);
    this.#stopMask = new Uint32Array(maskWords(compiled.vocabSize));
    for (const id of compiled.stopIds) {
      if (id < compiled.vocabSize) this.#stopMask[id >>> 5]! |= 1 << (id & 31);
    }
  }

  /**
   * A constraint at the start of `compiled`'s grammar. `label` names it in errors (e.g. `schema`).
   *
   * @throws QkValueError when the grammar engine fails to start a matcher.
   */
  static async create(compiled: Compiled, label: string): Promise<GrammarConstraint> {
    const { api } = compiled.instance;
    const matcher = await compiled.instance.run('structured output', label, () =>
      api.GrammarMatcher.createGrammarMatcher(compiled.grammar, [...compiled.stopIds]),
    );
    const constraint = new GrammarConstraint(matcher, compiled, label);
    matchers.register(constraint, matcher, constraint);
    constraint.#locateSite();
    constraint.#setMask(await matcher.getNextTokenBitmask());
    return constraint;
  }

  /** How the masks so far were obtained: through the prefetch, or the synchronous fallback. */
  get served(): Readonly<{ prefetched: number; synchronous: number }> {
    return { ...this.#served };
  }

  /** Resolves once the mask for the current state is at hand, so {@link nextMask} returns without computing. */
  async ready(): Promise<void> {
    while (this.#mask === undefined && this.#pending !== undefined) await this.#pending;
  }

  nextMask(): Uint32Array {
    if (this.#mask === undefined) {
      this.#setMask(this.#readMaskNow());
      this.#served.synchronous++;
    }
    return this.#mask!;
  }

  accept(token: number): void {
    const mask = this.nextMask();
    if (!Number.isInteger(token) || !maskAllows(mask, token)) {
      throw new QkValueError(
        'constrained generation',
        this.#label,
        `does not allow token ${token} here; pick only tokens its mask allows.`,
      );
    }
    if (!this.#matcher.acceptToken(token)) {
      throw new QkValueError(
        'constrained generation',
        this.#label,
        `rejected token ${token} although its mask allowed it; this is a grammar engine bug, please report it.`,
      );
    }
    this.#state++;
    this.#mask = undefined;
    if (this.#matcher.isTerminated()) return;
    if (this.#utf8 !== 0 || !this.#pieces.isAscii(token)) {
      this.#utf8 = utf8After(this.#utf8, this.#pieces.bytes(token));
    }
    if (this.#sites !== undefined) {
      this.#sinceQuote = this.#sites.table.advance(this.#sinceQuote, token);
      this.#locateSite(token);
    }
    if (this.#canEnd()) {
      // The text may be complete: read the mask now, so isComplete() can tell before the next step whether
      // anything but a stop token may follow. Rare (the end of the text, or a number that may go on).
      this.#setMask(this.#readMaskNow());
      this.#served.synchronous++;
    } else this.#prefetch();
  }

  /** Whether a stop token could be accepted now: tried on the matcher and rolled back. */
  #canEnd(): boolean {
    return this.#stopId !== undefined && this.#takes(this.#stopId);
  }

  /** Whether the matcher would accept `id` now (tried and rolled back). */
  #takes(id: number): boolean {
    if (!this.#matcher.acceptToken(id)) return false;
    this.#matcher.rollBack(1);
    return true;
  }

  /** The length site whose string the matcher is in, or `undefined` (sites.ts: the marks tried). */
  #siteHere(sites: CompiledSites): LengthSite | undefined {
    if (this.#takes(sites.freeTextId)) return undefined;
    let inside: LengthSite | undefined;
    for (const site of sites.sites) {
      if (!this.#takes(site.markId)) continue;
      if (inside !== undefined) {
        throw new QkValueError(
          'constrained generation',
          this.#label,
          'is inside two length-bounded strings at once; this is a bug in qk, please report it with the schema.',
        );
      }
      inside = site;
    }
    return inside;
  }

  /**
   * Sets the length mask of the site the matcher is in, if any. Text that ends inside a character (pieces split
   * UTF-8) is completed first with continuation bytes the matcher takes: no mark is taken mid-character.
   */
  #locateSite(token?: number): void {
    this.#lengthMask = undefined;
    const sites = this.#sites;
    if (sites === undefined || this.#matcher.isTerminated()) return;
    // A site's string is entered and left only through a quote: after a piece without one, the matcher is where it
    // was (most steps inside a string), and only the count moved.
    if (token === undefined || sites.table.hasQuote(token)) {
      const finish = utf8Completion(this.#utf8);
      this.#site = finish.length === 0 ? this.#siteHere(sites) : this.#siteAfter(finish, sites);
    }
    const inside = this.#site;
    if (inside !== undefined) {
      this.#lengthMask = sites.table.lengthMask(inside.lo - this.#sinceQuote, inside.hi - this.#sinceQuote);
    }
  }

  /**
   * Clears from `mask` the pieces that would open a length site inside them and break its bounds there: each piece
   * whose text after a quote could (`risky`) is spelt byte by byte up to each of its quotes on the matcher, which says
   * whether that quote opened a site; texts up to a quote shared by several pieces are spelt once.
   */
  #dropBreaking(mask: Uint32Array, sites: CompiledSites): void {
    const { table, risky } = sites;
    const opened = new Map<string, LengthSite | null>();
    for (let w = 0; w < mask.length; w++) {
      let bits = mask[w]! & risky[w]!;
      while (bits !== 0) {
        const bit = 31 - Math.clz32(bits & -bits);
        bits &= bits - 1;
        if (!this.#keepsBounds(table.bytes(w * 32 + bit)!, sites, opened)) mask[w]! &= ~(1 << bit);
      }
    }
  }

  /** Whether every site the text `bytes` opens keeps its bounds within it (see {@link #dropBreaking}). */
  #keepsBounds(bytes: Uint8Array, sites: CompiledSites, opened: Map<string, LengthSite | null>): boolean {
    for (let q = bytes.indexOf(0x22); q >= 0; ) {
      const next = bytes.indexOf(0x22, q + 1);
      const key = String.fromCharCode(...bytes.subarray(0, q + 1));
      let site = opened.get(key);
      if (site === undefined) {
        site = this.#siteAfter(bytes.subarray(0, q + 1), sites) ?? null;
        opened.set(key, site);
      }
      if (site !== null) {
        let chars = 0;
        for (let i = q + 1; i < (next < 0 ? bytes.length : next); i++)
          if ((bytes[i]! & 0xc0) !== 0x80) chars++;
        if (chars > site.hi || (next >= 0 && chars < site.lo)) return false;
      }
      q = next;
    }
    return true;
  }

  /** The site the matcher would be in after `bytes`, spelt through single-byte pieces and rolled back. */
  #siteAfter(bytes: Uint8Array, sites: CompiledSites): LengthSite | undefined {
    let taken = 0;
    try {
      for (const b of bytes) {
        if (!this.#matcher.acceptToken(sites.table.byteId(b))) return undefined;
        taken++;
      }
      return this.#siteHere(sites);
    } finally {
      if (taken > 0) this.#matcher.rollBack(taken);
    }
  }

  /**
   * True once a stop token was accepted, or when nothing but a stop token may follow (the text is complete; asking
   * the model for the stop token would only cost a step).
   */
  isComplete(): boolean {
    return this.#matcher.isTerminated() || (this.#mask !== undefined && this.#onlyStops);
  }

  /** Frees the matcher now rather than when the constraint is collected. Further calls throw. */
  dispose(): void {
    if (matchers.unregister(this)) this.#matcher.dispose();
  }

  #prefetch(): void {
    const state = this.#state;
    const pending = this.#matcher.getNextTokenBitmask().then(
      (mask) => {
        if (this.#state === state && this.#mask === undefined) {
          this.#setMask(mask);
          this.#served.prefetched++;
        }
      },
      // A failure here shows again, with its reason, when the mask is read synchronously.
      () => {},
    );
    this.#pending = pending;
    pending.finally(() => {
      if (this.#pending === pending) this.#pending = undefined;
    });
  }

  #readMaskNow(): Int32Array {
    const vector = (this.#matcher as unknown as { handle: MatcherBinding }).handle.GetNextTokenBitmask(
      this.#vocabSize,
    );
    try {
      const words = new Int32Array(vector.size());
      for (let i = 0; i < words.length; i++) words[i] = vector.get(i);
      return words;
    } finally {
      vector.delete();
    }
  }

  #setMask(words: Int32Array): void {
    const mask = new Uint32Array(words.buffer, words.byteOffset, words.length);
    // One pass: the UTF-8 and length narrowing (a mask is read on the host while a 0.6B step takes ~0.44 ms).
    const utf8 = this.#pieces.utf8Mask(this.#utf8);
    const lengths = this.#lengthMask;
    const sites = this.#sites;
    if (sites === undefined) for (let i = 0; i < mask.length; i++) mask[i]! &= utf8[i]!;
    else {
      const { risky } = sites;
      let anyRisky = 0;
      for (let i = 0; i < mask.length; i++) {
        const word = mask[i]! & utf8[i]! & (lengths === undefined ? -1 : lengths[i]!);
        mask[i] = word;
        anyRisky |= word & risky[i]!;
      }
      if (anyRisky !== 0) this.#dropBreaking(mask, sites);
    }
    let any = false;
    let onlyStops = true;
    for (let i = 0; i < mask.length; i++) {
      const word = mask[i]!;
      if (word === 0) continue;
      any = true;
      if ((word & ~this.#stopMask[i]!) !== 0) {
        onlyStops = false;
        break;
      }
    }
    this.#onlyStops = any && onlyStops;
    this.#mask = mask;
  }
}
