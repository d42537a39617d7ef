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
