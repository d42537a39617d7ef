/**
 * The parts of a schema's grammar qk writes itself, because xgrammar 0.1.27's JSON Schema converter or matcher gets
 * them wrong (see DESIGN.md): integer ranges (for `minimum: 968, maximum: 1611` it emits `"9" [6-9] [0-9] | …`,
 * which admits 960–967) and literal choices (`enum`, `const`: alternatives where one is a prefix of another). The
 * schema is compiled with a placeholder in their place, which grammar.ts replaces by these expressions.
 *
 * Integer ranges match exactly the decimal JSON integers in `[lo, hi]` (no leading zeros, `-0` excluded); within one
 * digit count, alternatives at each level start with different digits, so no alternative is a prefix of another.
 * schema.ts gives every integer a range (±(2^53−1) where the schema sets none).
 *
 * An unbounded `number` is our finite-number expression instead of xgrammar's, which allows any count of digits
 * and exponents such as `1e400` (JSON.parse makes that Infinity, which validates as no number): a noisy model could
 * write digits until `maxTokens`, or an Infinity. Ours is JSON's number grammar with each part's length bounded, so
 * every text it matches parses to a finite double and is at most 38 characters.
 */

/** Numbers of the same digit count `a ≤ b` (as strings, inner digits may be zeros). */
function sameLength(a: string, b: string): string {
  if (a === b) return `"${a}"`;
  if (a.length === 1) return `[${a}-${b}]`;
  let shared = 0;
  while (a[shared] === b[shared]) shared++;
  if (shared > 0) return `"${a.slice(0, shared)}" ${group(sameLength(a.slice(shared), b.slice(shared)))}`;
  const rest = a.length - 1;
  const lowTail = a.slice(1);
  const highTail = b.slice(1);
  const parts: string[] = [];
  let first = Number(a[0]);
  let last = Number(b[0]);
  if (!/^0*$/.test(lowTail)) {
    parts.push(`"${a[0]}" ${group(sameLength(lowTail, '9'.repeat(rest)))}`);
    first++;
  }
  const high: string[] = [];
  if (!/^9*$/.test(highTail)) {
    high.push(`"${b[0]}" ${group(sameLength('0'.repeat(rest), highTail))}`);
    last--;
  }
  if (first <= last) parts.push(`${first === last ? `"${first}"` : `[${first}-${last}]`} [0-9]{${rest}}`);
  parts.push(...high);
  return parts.join(' | ');
}

const group = (expression: string) => (expression.includes(' | ') ? `(${expression})` : expression);

/** Non-negative integers in `[lo, hi]`, one alternative per digit count. */
function nonNegative(lo: bigint, hi: bigint): string[] {
  const parts: string[] = [];
  for (let from = lo; from <= hi; ) {
    const digits = from.toString().length;
    const top = 10n ** BigInt(digits) - 1n;
    const to = top < hi ? top : hi;
    parts.push(sameLength(from.toString(), to.toString()));
    from = to + 1n;
  }
  return parts;
}

/**
 * An EBNF expression (parenthesised) for the integers in `[lo, hi]`, written as JSON writes them.
 *
 * @throws RangeError when the bounds are not safe integers or `lo > hi`.
 */
export function integerRangeEbnf(lo: number, hi: number): string {
  if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || lo > hi) {
    throw new RangeError(`integerRangeEbnf needs safe integers lo <= hi, got ${lo} and ${hi}.`);
  }
  const parts: string[] = [];
  if (lo < 0) {
    // Negative numbers are "-" and a magnitude in [max(1, -hi), -lo].
    const top = BigInt(-lo);
    const bottom = hi < 0 ? BigInt(-hi) : 1n;
    parts.push(`"-" ${group(nonNegative(bottom, top).join(' | '))}`);
  }
  if (hi >= 0) parts.push(...nonNegative(BigInt(Math.max(lo, 0)), BigInt(hi)));
  return `(${parts.join(' | ')})`;
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
