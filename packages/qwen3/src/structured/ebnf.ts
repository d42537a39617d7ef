/**
 * The parts of a schema's grammar qk writes itself, because xgrammar 0.1.27's JSON Schema converter or matcher gets
 * them wrong (see DESIGN.md): integer ranges (for `minimum: 968, maximum: 1611` it emits `"9" [6-9] [0-9] | …`,
 * which admits 960–967) and literal choices (`enum`, `const`: alternatives where one is a prefix of another). The
 * schema is compiled with a placeholder in their place, which grammar.ts replaces by these expressions (and the rules
 * they refer to).
 *
 * Integer ranges match exactly the decimal JSON integers in `[lo, hi]` (no leading zeros, `-0` excluded), written as
 * a deterministic automaton over digits (see `magnitudes`).
 * schema.ts gives every integer a range (±(2^53−1) where the schema sets none).
 *
 * An unbounded `number` is our finite-number expression instead of xgrammar's, which allows any count of digits
 * and exponents such as `1e400` (JSON.parse makes that Infinity, which validates as no number): a noisy model could
 * write digits until `maxTokens`, or an Infinity. Ours is JSON's number grammar with each part's length bounded, so
 * every text it matches parses to a finite double and is at most 38 characters.
 */

/** Names and collects the rules of one fragment: `prefix_0`, `prefix_1`, … */
class RuleNamer {
  readonly rules: string[] = [];
  readonly #byBody = new Map<string, string>();
  constructor(readonly prefix: string) {}
  /** The rule with `body`: a new one, or the one made before with the same body (the same language). */
  add(body: string): string {
    const known = this.#byBody.get(body);
    if (known !== undefined) return known;
    const name = `${this.prefix}_${this.rules.length}`;
    this.rules.push(`${name} ::= ${body}`);
    this.#byBody.set(body, name);
    return name;
  }
}

/**
 * The decimal strings of the integers in `[lo, hi]` (`0 ≤ lo ≤ hi`, no leading zeros) as a deterministic automaton
 * over digits, one EBNF rule per state (added to `rules`; the start state's name is returned): at every point the
 * digits that may come next are split into disjoint classes, each with one continuation, and a state where the
 * number may end has an empty alternative. So the grammar engine never holds two readings of one prefix.
 *
 * (The first version was one alternative per digit count — `[4-9] [0-9]{2} | [1-9] [0-9]{3} | …` — whose
 * alternatives share prefixes. xgrammar 0.1.27's matcher accepted unbounded digit strings from it, although its own
 * string acceptor refused them: `[369, 2^53−1]` let a 67-digit integer through.)
 */
function magnitudes(lo: bigint, hi: bigint, rules: RuleNamer): string {
  // A track per digit count d still possible: digits read, and whether the prefix still equals the lowest (tl) or
  // highest (th) d-digit number allowed.
  type Track = { d: number; pos: number; tl: boolean; th: boolean };
  const bounds = new Map<number, [string, string]>();
  for (let d = lo.toString().length; d <= hi.toString().length; d++) {
    const floor = d === 1 ? 0n : 10n ** BigInt(d - 1);
    const ceil = 10n ** BigInt(d) - 1n;
    const a = lo > floor ? lo : floor;
    const b = hi < ceil ? hi : ceil;
    if (a <= b) bounds.set(d, [a.toString(), b.toString()]);
  }
  // A finished track, or a tight one whose bound's remaining digits admit every digit string (all 0s below, all 9s
  // above), is the same state as a free one: folding them keeps the automaton minimal.
  const fold = (t: Track): Track => {
    if (t.pos === t.d) return { ...t, tl: false, th: false };
    const [a, b] = bounds.get(t.d)!;
    return {
      ...t,
      tl: t.tl && !/^0*$/.test(a.slice(t.pos)),
      th: t.th && !/^9*$/.test(b.slice(t.pos)),
    };
  };
  const keyOf = (tracks: Track[]) =>
    tracks
      .map((t) => `${t.d}.${t.pos}.${t.tl ? 1 : 0}${t.th ? 1 : 0}`)
      .sort()
      .join(' ');
  // Each state is one rule (states with equal rules merged), referenced wherever it is reached. Written as one nested expression, a state reached
  // along several paths was copied into each, and xgrammar made every copy's parenthesised group a rule of its own
  // whose token masks it builds: ~25 ms to compile [1, 2^53−1] with Qwen3's vocabulary, against ~4 ms for 31 rules.
  const memo = new Map<string, string>();
  const state = (tracks: Track[]): string => {
    const key = keyOf(tracks);
    const known = memo.get(key);
    if (known !== undefined) return known;
    const accepting = tracks.some((t) => t.pos === t.d);
    // Digits grouped by the state they lead to, in digit order.
    const byTarget = new Map<string, { digits: number[]; next: Track[] }>();
    for (let x = 0; x <= 9; x++) {
      const next: Track[] = [];
      for (const t of tracks) {
        if (t.pos === t.d) continue;
        const [a, b] = bounds.get(t.d)!;
        const low = t.tl ? Number(a[t.pos]) : 0;
        const high = t.th ? Number(b[t.pos]) : 9;
        if (x < low || x > high) continue;
        next.push(fold({ d: t.d, pos: t.pos + 1, tl: t.tl && x === low, th: t.th && x === high }));
      }
      if (next.length === 0) continue;
      const k = keyOf(next);
      const entry = byTarget.get(k);
      if (entry === undefined) byTarget.set(k, { digits: [x], next });
      else entry.digits.push(x);
    }
    const alternatives = [...byTarget.values()].map(({ digits, next }) => {
      const rest = state(next);
      return rest === '' ? digitClass(digits) : `${digitClass(digits)} ${rest}`;
    });
    // A state with no way on matches nothing more: the empty expression.
    const out =
      alternatives.length === 0
        ? ''
        : rules.add((accepting ? ['""', ...alternatives] : alternatives).join(' | '));
    memo.set(key, out);
    return out;
  };
  return state([...bounds.keys()].map((d) => fold({ d, pos: 0, tl: true, th: true })));
}

/** `digits` (ascending) as one EBNF character class, or a literal for a single digit. */
function digitClass(digits: readonly number[]): string {
  if (digits.length === 1) return `"${digits[0]}"`;
  let out = '';
  for (let i = 0; i < digits.length; ) {
    let j = i;
    while (j + 1 < digits.length && digits[j + 1] === digits[j]! + 1) j++;
    out += j === i ? `${digits[i]}` : j === i + 1 ? `${digits[i]}${digits[j]}` : `${digits[i]}-${digits[j]}`;
    i = j + 1;
  }
  return `[${out}]`;
}

/** An EBNF expression and the rules it refers to (complete `name ::= body` lines, to append to the grammar). */
export interface EbnfFragment {
  readonly expression: string;
  readonly rules: readonly string[];
}

/**
 * An EBNF expression (parenthesised) for the integers in `[lo, hi]`, written as JSON writes them, and its rules,
 * named `prefix_0`, `prefix_1`, … (one per automaton state).
 *
 * @throws RangeError when the bounds are not safe integers or `lo > hi`.
 */
export function integerRangeEbnf(lo: number, hi: number, prefix: string): EbnfFragment {
  if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || lo > hi) {
    throw new RangeError(`integerRangeEbnf needs safe integers lo <= hi, got ${lo} and ${hi}.`);
  }
  const rules = new RuleNamer(prefix);
  const parts: string[] = [];
  // Negative numbers are "-" and a magnitude in [max(1, -hi), -lo]; "-" starts no non-negative number.
  if (lo < 0) parts.push(`"-" ${magnitudes(hi < 0 ? BigInt(-hi) : 1n, BigInt(-lo), rules)}`);
  if (hi >= 0) parts.push(magnitudes(BigInt(Math.max(lo, 0)), BigInt(hi), rules));
  return { expression: `(${parts.join(' | ')})`, rules: rules.rules };
}

/** `fragment` as a grammar whose root rule is its expression. */
export function fragmentGrammar(fragment: EbnfFragment): string {
  return [`root ::= ${fragment.expression}`, ...fragment.rules].join('\n');
}

/**
 * An EBNF expression (parenthesised) for JSON numbers of bounded length: an optional `-`, an integer part `0` or
 * `[1-9]` and at most 15 more digits, an optional fraction `.` and 1–16 digits, an optional exponent `e`/`E`, an
 * optional sign and 1–2 digits. The largest magnitude is below 10^116, far inside a double's range, so JSON.parse
 * never returns ±Infinity. JSON's own rules hold: no leading zeros (`01`), no bare `.` (`1.`, `.5`), no empty
 * exponent (`1e`); `-0` and `-0.5` are JSON numbers and are matched. Alternatives start with different characters.
 */
export function finiteNumberEbnf(): string {
  return '("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [+\\-]? [0-9]{1,2})?)';
}

/** The characters a JSON string may hold unescaped, as an EBNF class. */
const PLAIN = '[^\\"\\\\\\0-\\x1f]';

/** Repetitions per rule in {@link boundedStringEbnf}. */
const CHUNK = 8;

/**
 * An EBNF expression (parenthesised) for a JSON string of `min` to `max` (`undefined`: any count) unescaped
 * characters, quotes included, and its rules, named `prefix_0`, `prefix_1`, …
 *
 * Why not `"\"" [^…]{min,max} "\""`: xgrammar 0.1.27 writes that repetition as a chain of rules, one per character,
 * each optional, and builds token masks for each position by walking the vocabulary through a rule expansion per
 * character: ~35 ms per unit of `max` with Qwen3's vocabulary, and tokens that cross the end of an optional rule are
 * left for decode to settle (masks up to ~10 ms at p90). Here each rule holds up to 8 characters as alternatives of
 * plain sequences, which xgrammar compiles into one finite automaton, and ends with the closing quote: about half the
 * compile time, and masks under 0.3 ms (structured/DESIGN.md).
 */
export function boundedStringEbnf(min: number, max: number | undefined, prefix: string): EbnfFragment {
  if (
    !Number.isSafeInteger(min) ||
    min < 0 ||
    (max !== undefined && (!Number.isSafeInteger(max) || max < min))
  ) {
    throw new RangeError(`boundedStringEbnf needs 0 <= min <= max, got ${min} and ${max}.`);
  }
  const quote = '"\\""';
  const rules = new RuleNamer(prefix);
  const plain = (n: number) => Array<string>(n).fill(PLAIN);
  // Up to `left` more characters, then the quote: at most CHUNK of them here, the rest in the next rule.
  const rest = (left: number): string => {
    const alternatives: string[] = [];
    for (let n = 0; n <= Math.min(left, CHUNK - 1); n++) alternatives.push([...plain(n), quote].join(' '));
    if (left >= CHUNK)
      alternatives.push([...plain(CHUNK), left === CHUNK ? quote : rest(left - CHUNK)].join(' '));
    return rules.add(alternatives.join(' | '));
  };
  const tail = max === undefined ? `${PLAIN}* ${quote}` : rest(max - min);
  return { expression: `(${[quote, ...plain(min), tail].join(' ')})`, rules: rules.rules };
}

/** `text` as an EBNF string literal (xgrammar's escapes for the quote and the backslash). */
function literal(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * An EBNF expression (parenthesised) matching exactly the given texts, factored as a trie: alternatives at each
 * level start with different characters and a text that ends where others go on is an empty alternative, so no
 * alternative is a prefix of another (xgrammar 0.1.27 mishandles those; see DESIGN.md).
 */
export function literalsEbnf(texts: readonly string[]): string {
  const unique = [...new Set(texts)];
  if (unique.length === 0) throw new RangeError('literalsEbnf needs at least one text.');
  const build = (words: readonly string[][]): string => {
    const alternatives: string[] = [];
    if (words.some((w) => w.length === 0)) alternatives.push('""');
    const byFirst = new Map<string, string[][]>();
    for (const w of words) {
      if (w.length === 0) continue;
      const group = byFirst.get(w[0]!) ?? [];
      group.push(w);
      byFirst.set(w[0]!, group);
    }
    for (const [first, group] of byFirst) {
      // Characters every word of the group shares, as one literal.
      let shared = 1;
      while (group.every((w) => w.length > shared && w[shared] === group[0]![shared])) shared++;
      const head = literal(first + group[0]!.slice(1, shared).join(''));
      const rest = group.map((w) => w.slice(shared));
      alternatives.push(rest.every((w) => w.length === 0) ? head : `${head} ${build(rest)}`);
    }
    return alternatives.length === 1 ? alternatives[0]! : `(${alternatives.join(' | ')})`;
  };
  return `(${build(unique.map((t) => [...t]))})`;
}

/** A parsed regex (the subset {@link patternEbnf} converts). */
type RegexNode =
  | { readonly kind: 'atom'; readonly ebnf: string }
  | { readonly kind: 'seq'; readonly items: readonly RegexNode[] }
  | { readonly kind: 'alt'; readonly options: readonly RegexNode[] }
  | {
      readonly kind: 'repeat';
      readonly item: RegexNode;
      readonly min: number;
      readonly max: number | undefined;
    };

/** An ASCII code point as it stands in an EBNF character class or literal: printable ones plain, others `\xHH`. */
function asciiEbnf(code: number, inClass: boolean): string {
  const c = String.fromCharCode(code);
  if (/[A-Za-z0-9 _,.:;!#$%&'*+/<=>?@`{}|~()]/.test(c)) return c;
  if (!inClass && c === '-') return c;
  if (inClass && '^]-[\\'.includes(c)) return `\\${c}`;
  return `\\x${code.toString(16).padStart(2, '0')}`;
}

/** Escapes that stand for a class: `\d`, `\w` (ASCII, as JavaScript's regexes without the `i` flag). */
const CLASS_ESCAPES: Readonly<Record<string, readonly [number, number][]>> = {
  d: [[48, 57]],
  w: [
    [48, 57],
    [65, 90],
    [95, 95],
    [97, 122],
  ],
};

/**
 * `pattern` parsed into {@link RegexNode}s, or `undefined` where it leaves the subset: ASCII literals and escaped
 * punctuation, classes of ASCII members (negated ones included), `\d` `\w`, groups `(…)` `(?:…)`, `|`, greedy
 * `?` `*` `+` `{m}` `{m,}` `{m,n}`, and `^`/`$` at the ends only (the match is the whole string either way, as
 * xgrammar's converter takes it). Non-ASCII members are left out: xgrammar 0.1.27 mis-compiles classes that mix
 * characters of different UTF-8 lengths (`[é中]` matches neither), so those stay with its own converter, unchanged.
 */
function parseRegex(pattern: string): RegexNode | undefined {
  let src = pattern;
  if (src.startsWith('^')) src = src.slice(1);
  if (src.endsWith('$') && !src.endsWith('\\$')) src = src.slice(0, -1);
  let i = 0;
  const fail = (): never => {
    throw new RangeError('outside the subset');
  };
  const code = (c: string | undefined): number => {
    if (c === undefined) return fail();
    const n = c.codePointAt(0)!;
    return n < 0x20 || n > 0x7e ? fail() : n;
  };
  // One class member or escape inside [...]: its ranges.
  const classItem = (): [number, number][] => {
    const c = src[i++];
    if (c === '\\') {
      const e = src[i++];
      if (e !== undefined && CLASS_ESCAPES[e] !== undefined) return [...CLASS_ESCAPES[e]!];
      // \uHHHH and \xHH of ASCII code points (controls included: `[^"\\\u0000-\u001f]`).
      const hex = /^(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))/.exec(src.slice(i - 1));
      if (hex !== null) {
        i += hex[0].length - 1;
        const n = Number.parseInt(hex[1] ?? hex[2]!, 16);
        return n > 0x7f ? fail() : [[n, n]];
      }
      if (e === undefined || /[A-Za-z0-9]/.test(e)) return fail();
      return [[code(e), code(e)]];
    }
    return [[code(c), code(c)]];
  };
  const klass = (): RegexNode => {
    i++; // [
    const negated = src[i] === '^';
    if (negated) i++;
    const ranges: [number, number][] = [];
    let first = true;
    while (src[i] !== ']' || first) {
      if (i >= src.length || (src[i] === '[' && !first)) return fail();
      first = false;
      const start = src[i] === '\\' && CLASS_ESCAPES[src[i + 1] ?? ''] !== undefined;
      const lo = classItem();
      if (!start && lo.length === 1 && src[i] === '-' && src[i + 1] !== ']' && i + 1 < src.length) {
        i++;
        if (src[i] === '\\' && CLASS_ESCAPES[src[i + 1] ?? ''] !== undefined) return fail();
        const hi = classItem();
        if (hi[0]![0] < lo[0]![0]) return fail();
        ranges.push([lo[0]![0], hi[0]![0]]);
      } else ranges.push(...lo);
    }
    i++; // ]
    if (ranges.length === 0) return fail();
    const body = ranges
      .map(([a, b]) => (a === b ? asciiEbnf(a, true) : `${asciiEbnf(a, true)}-${asciiEbnf(b, true)}`))
      .join('');
    return { kind: 'atom', ebnf: `[${negated ? '^' : ''}${body}]` };
  };
  const atom = (): RegexNode => {
    const c = src[i]!;
    if (c === '[') return klass();
    if (c === '(') {
      i++;
      if (src.startsWith('?:', i)) i += 2;
      else if (src[i] === '?') return fail();
      const inner = alternation();
      if (src[i] !== ')') return fail();
      i++;
      return inner;
    }
    if (c === '\\') {
      const e = src[i + 1];
      i += 2;
      if (e !== undefined && CLASS_ESCAPES[e] !== undefined) {
        const body = CLASS_ESCAPES[e]!.map(([a, b]) =>
          a === b ? asciiEbnf(a, true) : `${asciiEbnf(a, true)}-${asciiEbnf(b, true)}`,
        ).join('');
        return { kind: 'atom', ebnf: `[${body}]` };
      }
      if (e === undefined || /[A-Za-z0-9]/.test(e)) return fail();
      return { kind: 'atom', ebnf: `"${asciiEbnf(code(e), false).replace(/^["\\]$/, '\\$&')}"` };
    }
    if ('.^$|)*+?{}]'.includes(c)) return fail();
    i++;
    return { kind: 'atom', ebnf: `"${asciiEbnf(code(c), false)}"` };
  };
  const quantified = (): RegexNode => {
    let node = atom();
    for (;;) {
      const c = src[i];
      let min: number;
      let max: number | undefined;
      if (c === '?' || c === '*' || c === '+') {
        i++;
        [min, max] = c === '?' ? [0, 1] : c === '*' ? [0, undefined] : [1, undefined];
      } else if (c === '{') {
        const m = /^\{(\d{1,4})(,(\d{0,4}))?\}/.exec(src.slice(i));
        if (m === null) return fail();
        i += m[0].length;
        min = Number(m[1]);
        max = m[2] === undefined ? min : m[3] === '' ? undefined : Number(m[3]);
        if (max !== undefined && max < min) return fail();
      } else return node;
      if (src[i] === '?' || src[i] === '+') return fail(); // lazy or possessive
      node = { kind: 'repeat', item: node, min, max };
    }
  };
  const sequence = (): RegexNode => {
    const items: RegexNode[] = [];
    while (i < src.length && src[i] !== '|' && src[i] !== ')') items.push(quantified());
    return items.length === 1 ? items[0]! : { kind: 'seq', items };
  };
  function alternation(): RegexNode {
    const options = [sequence()];
    while (src[i] === '|') {
      i++;
      options.push(sequence());
    }
    return options.length === 1 ? options[0]! : { kind: 'alt', options };
  }
  try {
    const node = alternation();
    return i === src.length ? node : undefined;
  } catch (error) {
    if (error instanceof RangeError) return undefined;
    throw error;
  }
}

/**
 * An EBNF expression (parenthesised) for a JSON string whose content matches `pattern` in full (as xgrammar's own
 * converter reads a schema's `pattern`), quotes included, and its rules (`prefix_0`, …); `undefined` for a pattern
 * outside the subset `parseRegex` describes, which stays with xgrammar's converter.
 *
 * Written continuation by continuation: each part of the pattern is followed by what comes after it, through the
 * closing quote. A bounded repetition of one character (`[a-z0-9-]{0,15}`) becomes rules of up to 8 characters that
 * end with that continuation, as {@link boundedStringEbnf} does for lengths, instead of xgrammar's chain of optional
 * rules (one per repetition, each re-scanning the vocabulary and leaving tokens across its end to decode): about
 * half the compile time and masks under 0.2 ms (structured/DESIGN.md).
 */
export function patternEbnf(pattern: string, prefix: string): EbnfFragment | undefined {
  const tree = parseRegex(pattern);
  if (tree === undefined) return undefined;
  const rules = new RuleNamer(prefix);
  // A continuation used more than once is named, so expressions stay small.
  const named = (cont: string): string => (/^[\w]+$/.test(cont) || cont === '"\\""' ? cont : rules.add(cont));
  const emit = (node: RegexNode, cont: string): string => {
    switch (node.kind) {
      case 'atom':
        return cont === '""' ? node.ebnf : `${node.ebnf} ${cont}`;
      case 'seq':
        return node.items.reduceRight((rest, item) => emit(item, rest), cont);
      case 'alt': {
        const after = named(cont);
        return `(${node.options.map((o) => emit(o, after)).join(' | ')})`;
      }
      case 'repeat': {
        const { item, min, max } = node;
        if (max === 0) return cont;
        const after = named(cont);
        let tail: string;
        if (max === undefined) {
          // item* then the continuation: a character class loops on itself; else a right-recursive rule.
          if (item.kind === 'atom' && item.ebnf.startsWith('[')) tail = `${item.ebnf}* ${after}`;
          else {
            const name = `${prefix}_s${rules.rules.length}`;
            rules.rules.push(`${name} ::= ${after} | ${emit(item, name)}`);
            tail = name;
          }
        } else if (item.kind === 'atom') {
          // Up to `left` more, then the continuation: blocks of CHUNK, each ending in the continuation.
          const rest = (left: number): string => {
            const alternatives: string[] = [];
            for (let n = 0; n <= Math.min(left, CHUNK - 1); n++)
              alternatives.push([...Array<string>(n).fill(item.ebnf), after].join(' '));
            if (left >= CHUNK)
              alternatives.push(
                [...Array<string>(CHUNK).fill(item.ebnf), left === CHUNK ? after : rest(left - CHUNK)].join(
                  ' ',
                ),
              );
            return rules.add(alternatives.join(' | '));
          };
          tail = max === min ? after : rest(max - min);
        } else {
          // A group: a chain, each rule the continuation or one more repetition.
          tail = after;
          for (let n = 0; n < max - min; n++) tail = rules.add(`${after} | ${emit(item, tail)}`);
        }
        for (let n = 0; n < min; n++) tail = emit(item, tail);
        return tail;
      }
    }
  };
  return { expression: `("\\"" ${emit(tree, '"\\""')})`, rules: rules.rules };
}

/**
 * A JSON string's content as fixed single characters, then one repetition of one character class: `prefix`, then
 * `loop` any number of times; `lo` to `hi` characters in all. Written so (see {@link lengthSiteEbnf}) the grammar
 * engine is given the repetition unbounded and the count is held by the constraint instead (sites.ts). The
 * repetition ends the string: any content within the count can then still be finished (more of `loop`, or the
 * quote), which a fixed part after it would not guarantee (`\w{3}` after the count is used up).
 */
export interface LengthSiteShape {
  /** EBNF atoms of one character each, before the repetition. */
  readonly prefix: readonly string[];
  /** The repeated atom's EBNF (one character). */
  readonly loop: string;
  /** The fewest and the most characters of the whole content. */
  readonly lo: number;
  readonly hi: number;
}

/** The shape of a string of `min` to `max` unescaped characters (schema.ts's pattern for lengths). */
export function boundedStringShape(min: number, max: number): LengthSiteShape {
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min < 0 || max < min) {
    throw new RangeError(`boundedStringShape needs 0 <= min <= max, got ${min} and ${max}.`);
  }
  return { prefix: [], loop: PLAIN, lo: min, hi: max };
}

/**
 * The shape of `pattern` when it is single characters and repetitions of one of fixed count, then one repetition of
 * one character of variable but bounded count (`[a-z][a-z0-9-]{0,15}`, `[A-Z]{2}-\d{1,6}`); `undefined` otherwise.
 * `lo`/`hi` are the fixed atoms plus the last repetition's `min`/`max`.
 */
export function patternSiteShape(pattern: string): LengthSiteShape | undefined {
  const tree = parseRegex(pattern);
  if (tree === undefined) return undefined;
  const items = tree.kind === 'seq' ? tree.items : [tree];
  const last = items[items.length - 1]!;
  if (
    last.kind !== 'repeat' ||
    last.item.kind !== 'atom' ||
    last.max === undefined ||
    last.max === last.min
  ) {
    return undefined;
  }
  const prefix: string[] = [];
  for (const node of items.slice(0, -1)) {
    if (node.kind === 'atom') prefix.push(node.ebnf);
    else if (
      node.kind === 'repeat' &&
      node.item.kind === 'atom' &&
      node.max === node.min &&
      node.min <= 256
    ) {
      prefix.push(...Array<string>(node.min).fill(node.item.ebnf));
    } else return undefined;
    if (prefix.length > 256) return undefined;
  }
  return { prefix, loop: last.item.ebnf, lo: prefix.length + last.min, hi: prefix.length + last.max };
}

/**
 * An EBNF expression (parenthesised) for a JSON string of `shape` whose repetition is unbounded, quotes included,
 * and its one rule, named `name`; `markByte` (a control character, which no JSON string holds) may stand before
 * every character of the content and before the closing quote. The count is not in the grammar: the constraint
 * asks the matcher whether it would take the mark, which is true exactly inside this string, and then allows only
 * the tokens that keep the count within `lo`…`hi` (sites.ts). One loop state instead of one grammar position per
 * count: a `maxLength: 24` compiles in ~14 ms instead of ~480 (structured/DESIGN.md).
 */
export function lengthSiteEbnf(shape: LengthSiteShape, name: string, markByte: number): EbnfFragment {
  if (!Number.isInteger(markByte) || markByte < 1 || markByte > 0x1f) {
    throw new RangeError(`lengthSiteEbnf needs a control character for the mark, got ${markByte}.`);
  }
  const mark = `"\\x${markByte.toString(16).padStart(2, '0')}"`;
  const rule = `${name} ::= ${shape.loop}* ("\\"" | (${mark} ${name}))`;
  const prefix = shape.prefix.map((a) => `(${mark})? ${a}`);
  return { expression: `(${['"\\""', ...prefix, name].join(' ')})`, rules: [rule] };
}
