/**
 * The JSON Schemas structured output accepts, and how they are put to xgrammar so that every output validates.
 *
 * xgrammar 0.1.27 compiles most of JSON Schema faithfully, but not all of it, and what it cannot enforce it mostly
 * ignores in silence (`uniqueItems`, `format`) or gets wrong (measured with random schemas against ajv): numeric
 * ranges with a single bound (`minimum: 3` also admits 1 and 2), exclusive bounds, and every bound of a `number`
 * (`maximum: 58` admits 58.25; `minimum: 2.5` admits "2x5"); two-sided integer ranges are wrong near their bounds
 * too (`[968, 1611]` admits 965). So:
 * - integer bounds are rewritten as one inclusive two-sided range (a missing side becomes ±(2^53−1)), which
 *   grammar.ts compiles with its own EBNF (ebnf.ts) instead of xgrammar's;
 * - an integer without bounds gets the range [−(2^53−1), 2^53−1] too, and a `number` without bounds is left for
 *   grammar.ts to write as ebnf.ts's finite number (at most 16 integer digits, 16 fraction digits, 2 exponent
 *   digits): xgrammar's own rules allow any count of digits, so a noisy model may write digits until `maxTokens`,
 *   and exponents such as `1e400`, which JSON.parse makes Infinity and no `number` schema accepts. Where the node
 *   also has `enum`, `const`, `anyOf` or `$ref`, these defaults are not applied (the grammar follows those, not
 *   `type`);
 * - a `number` with bounds is narrowed to the integers in its range (a valid subset: the output still validates),
 *   and refused when that range holds no integer;
 * - a `type` array (`["number", "null"]`) becomes an `anyOf` of one branch per type, each with the keywords that
 *   apply to that type (bounds to numbers, lengths and patterns to strings, …), so every branch gets the rewrites
 *   here; `integer` is dropped beside `number`, which includes it. Not with `enum`, `const`, `anyOf` or `$ref` on
 *   the same node: those are left as they were;
 * - string lengths become a pattern over the characters JSON lets stand unescaped: xgrammar's own length rule
 *   admits raw tabs and other control characters, which no JSON parser accepts (grammar.ts writes that pattern's
 *   grammar itself, ebnf.ts's `boundedStringEbnf`, for compile time);
 * - a `pattern` that could match `"`, `\` or a control character is refused: xgrammar writes pattern matches into
 *   the JSON text unescaped;
 * - `enum` and `const` are written by grammar.ts as a trie of their JSON texts: xgrammar 0.1.27's matcher
 *   mishandles alternatives of literals when one is a prefix of another (from `["lh uv", "l"]` it accepts
 *   `"lh uvh uv"`, character by character too; from `[11, 211, 212]` it accepts 12); objects and arrays there are
 *   refused;
 * - keywords xgrammar does not enforce are refused with a sentence, instead of producing output that may not
 *   validate. Annotations (`title`, `description`, `default`, …) are kept and ignored.
 */
import { QkValueError } from '@qk/ops';
import { Ajv } from 'ajv';

/** A JSON Schema (an object, or `true` for any JSON value). */
export type JsonSchema = Readonly<Record<string, unknown>> | boolean;

/** Keywords whose constraint the grammar enforces (with the rewrites above). */
const ENFORCED = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'anyOf',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  '$ref',
  '$defs',
  'definitions',
]);

/** Keywords that constrain nothing. */
const ANNOTATIONS = new Set([
  '$schema',
  '$id',
  '$comment',
  'title',
  'description',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

const ajv = new Ajv({ strict: false, validateSchema: true });

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/** `[lo, hi]`: the integers a schema's bounds admit. */
function integerRange(s: Record<string, unknown>): [number, number] {
  const num = (k: string) => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
  const lows = [num('minimum'), num('exclusiveMinimum')];
  const highs = [num('maximum'), num('exclusiveMaximum')];
  let lo = -Number.MAX_SAFE_INTEGER;
  let hi = Number.MAX_SAFE_INTEGER;
  if (lows[0] !== undefined) lo = Math.max(lo, Math.ceil(lows[0]));
  if (lows[1] !== undefined) lo = Math.max(lo, Math.floor(lows[1]) + 1);
  if (highs[0] !== undefined) hi = Math.min(hi, Math.floor(highs[0]));
  if (highs[1] !== undefined) hi = Math.min(hi, Math.ceil(highs[1]) - 1);
  return [lo, hi];
}

const BOUNDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'] as const;

/**
 * The keywords that constrain values of one type each (a value of another type passes them). The other enforced
 * keywords either keep a node whole (`enum`, `const`, `anyOf`, `$ref`) or hold definitions (`$defs`).
 */
const TYPE_KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  integer: BOUNDS,
  number: BOUNDS,
  string: ['minLength', 'maxLength', 'pattern'],
  array: ['items', 'minItems', 'maxItems'],
  object: ['properties', 'required', 'additionalProperties'],
};

/**
 * A node with a `type` array as one schema per type, each with the node's keywords for that type (the same
 * values: one `anyOf` of them accepts exactly what the node accepts); `undefined` when the node keeps its form
 * (see the file comment). `$defs`/`definitions` stay with the caller, where `$ref` pointers find them.
 */
function splitTypes(node: Record<string, unknown>): Record<string, unknown>[] | undefined {
  if (!Array.isArray(node.type)) return undefined;
  if (['enum', 'const', 'anyOf', '$ref'].some((k) => node[k] !== undefined)) return undefined;
  const declared = node.type as string[];
  const types = declared.filter((t) => !(t === 'integer' && declared.includes('number')));
  return types.map((type) => {
    const branch: Record<string, unknown> = { type };
    for (const [key, value] of Object.entries(node)) {
      if (TYPE_KEYWORDS[type]?.includes(key)) branch[key] = value;
    }
    return branch;
  });
}

/** The characters of a JSON string that need no escape, as a regex class. */
export const PLAIN_CHAR = '[^"\\\\\\u0000-\\u001f]';

/**
 * The single-character atoms of a regex (escapes, classes, `.`, literals), skipping groups, anchors and
 * quantifiers: each matches one character, so testing each against the characters JSON must escape tells whether
 * the pattern can produce one.
 */
function patternAtoms(pattern: string): string[] {
  const atoms: string[] = [];
  for (let i = 0; i < pattern.length; ) {
    const c = pattern[i]!;
    if (c === '\\') {
      const sequence =
        /^\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[pP]\{[^}]*\}|c[A-Za-z]|.)/su.exec(
          pattern.slice(i),
        );
      const text = sequence?.[0] ?? c;
      // Back-references and word boundaries match no character of their own.
      if (!/^\\([1-9]|[bBk])/.test(text)) atoms.push(text);
      i += text.length;
    } else if (c === '[') {
      let j = i + 1;
      if (pattern[j] === '^') j++;
      if (pattern[j] === ']') j++;
      while (j < pattern.length && pattern[j] !== ']') j += pattern[j] === '\\' ? 2 : 1;
      atoms.push(pattern.slice(i, j + 1));
      i = j + 1;
    } else if (c === '{') {
      const end = pattern.indexOf('}', i);
      i = end < 0 ? i + 1 : end + 1;
    } else if (c === '(' && pattern[i + 1] === '?') {
      i += /^\(\?(<?[=!]|:|<[^>]*>)?/.exec(pattern.slice(i))![0].length;
    } else {
      if (!'()|*+?^$'.includes(c)) atoms.push(c);
      i++;
    }
  }
  return atoms;
}

function escapedCharacterIn(pattern: string): string | undefined {
  const dangerous = ['"', '\\', ...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i))];
  for (const atom of patternAtoms(pattern)) {
    let regex: RegExp;
    try {
      regex = new RegExp(`^${atom}$`, 'u');
    } catch {
      continue; // The grammar compiler judges syntax it alone understands.
    }
    const found = dangerous.find((ch) => regex.test(ch));
    if (found !== undefined) return `${atom} matches ${JSON.stringify(found)}`;
  }
  return undefined;
}

/** `enum`/`const` values: scalars only (grammar.ts writes them as literals; see the file comment). */
function checkLiterals(op: string, param: string, out: Record<string, unknown>, at: string): void {
  const key = out.enum !== undefined ? 'enum' : 'const';
  const values = key === 'enum' ? out.enum : [out.const];
  if (!Array.isArray(values) || values.length === 0) {
    throw new QkValueError(op, param, `has an empty or malformed enum at ${at}; list at least one value.`);
  }
  if (values.some((v) => typeof v === 'object' && v !== null)) {
    throw new QkValueError(
      op,
      param,
      `lists an object or array at ${at}.${key}; structured output enforces strings, numbers, booleans and null there.`,
    );
  }
}

/** String length bounds as a pattern over plain characters (see the file comment). */
function rewriteString(op: string, param: string, out: Record<string, unknown>, at: string): void {
  if (typeof out.pattern === 'string') {
    const escaped = escapedCharacterIn(out.pattern);
    if (escaped !== undefined) {
      throw new QkValueError(
        op,
        param,
        `has a pattern at ${at} that can produce a character JSON must escape (${escaped}); the grammar engine would write it raw and the JSON would not parse. Exclude quotes, backslashes and control characters from the pattern, e.g. [^"\\\\\\u0000-\\u001f].`,
      );
    }
  }
  if (out.minLength === undefined && out.maxLength === undefined) return;
  if (out.pattern !== undefined) {
    throw new QkValueError(
      op,
      param,
      `combines a pattern with minLength/maxLength at ${at}; structured output enforces one of them: put the length into the pattern ({m,n}).`,
    );
  }
  const min = typeof out.minLength === 'number' ? out.minLength : 0;
  const max = typeof out.maxLength === 'number' ? out.maxLength : '';
  delete out.minLength;
  delete out.maxLength;
  out.pattern = `^${PLAIN_CHAR}{${min},${max}}$`;
}

function rewrite(op: string, param: string, schema: unknown, at: string): unknown {
  if (typeof schema === 'boolean') return schema;
  if (!isObject(schema)) throw new QkValueError(op, param, `has ${at}, which is not a schema.`);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(key)) continue;
    if (!ENFORCED.has(key)) {
      throw new QkValueError(
        op,
        param,
        `uses "${key}" at ${at}, which structured output cannot enforce, so the output might not validate; remove it (and check it after generation if it matters). Enforced: ${[...ENFORCED].join(', ')}.`,
      );
    }
    out[key] = value;
  }
  const sub = (value: unknown, where: string) => rewrite(op, param, value, where);
  const map = (value: unknown, where: string) =>
    isObject(value)
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, sub(v, `${where}.${k}`)]))
      : value;
  const branches = splitTypes(out);
  if (branches !== undefined) {
    // Each branch is the user's node for one type: errors name the node itself.
    const split: Record<string, unknown> =
      branches.length === 1
        ? (sub(branches[0], at) as Record<string, unknown>)
        : { anyOf: branches.map((b) => sub(b, at)) };
    for (const defs of ['$defs', 'definitions'])
      if (out[defs] !== undefined) split[defs] = map(out[defs], `${at}.${defs}`);
    return split;
  }
  if (out.properties !== undefined) out.properties = map(out.properties, `${at}.properties`);
  for (const defs of ['$defs', 'definitions'])
    if (out[defs] !== undefined) out[defs] = map(out[defs], `${at}.${defs}`);
  if (isObject(out.additionalProperties))
    out.additionalProperties = sub(out.additionalProperties, `${at}.additionalProperties`);
  if (out.items !== undefined) out.items = sub(out.items, `${at}.items`);
  if (Array.isArray(out.anyOf)) out.anyOf = out.anyOf.map((s, i) => sub(s, `${at}.anyOf[${i}]`));
  if (out.enum !== undefined && out.const !== undefined) {
    throw new QkValueError(op, param, `has both enum and const at ${at}; keep one.`);
  }
  if (out.enum !== undefined || out.const !== undefined) checkLiterals(op, param, out, at);
  else if (out.type === 'string') rewriteString(op, param, out, at);
  else if (['pattern', 'minLength', 'maxLength'].some((k) => out[k] !== undefined)) {
    throw new QkValueError(
      op,
      param,
      `constrains a string at ${at} that is not declared "type": "string"; declare the type so the constraint can be enforced.`,
    );
  }
  const bounded = BOUNDS.some((k) => out[k] !== undefined);
  if (bounded && (out.type === 'integer' || out.type === 'number')) {
    const [lo, hi] = integerRange(out);
    if (lo > hi) {
      throw new QkValueError(
        op,
        param,
        `at ${at} bounds a ${out.type} to a range with no integer; structured output enforces numeric bounds on integers only (the grammar engine mis-compiles fractional ranges): widen the range or drop the bounds.`,
      );
    }
    for (const k of BOUNDS) delete out[k];
    Object.assign(out, { type: 'integer', minimum: lo, maximum: hi });
  } else if (bounded) {
    throw new QkValueError(
      op,
      param,
      `bounds a value at ${at} that is not declared "type": "integer" or "number"; declare the type so the bounds can be enforced.`,
    );
  } else if (
    out.type === 'integer' &&
    !['enum', 'const', 'anyOf', '$ref'].some((k) => out[k] !== undefined)
  ) {
    // Unbounded: the safe integers, so the grammar bounds the digits (see the file comment).
    Object.assign(out, { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });
  }
  return out;
}

/**
 * Checks `schema` (a JSON Schema by ajv's meta-schema, using only enforced keywords) and returns the form given to
 * the grammar engine (see the file comment).
 *
 * @throws QkValueError naming `param` and what to change.
 */
export function enforceableSchema(op: string, param: string, schema: unknown): JsonSchema {
  if (typeof schema === 'boolean') return schema;
  if (!isObject(schema)) {
    throw new QkValueError(op, param, 'must be a JSON Schema: an object such as { "type": "object", … }.');
  }
  // `$schema` names a dialect ajv may not bundle (2020-12); the keywords used here read the same in every draft.
  const { $schema: _dialect, ...body } = schema;
  if (!(ajv.validateSchema(body) as boolean)) {
    throw new QkValueError(op, param, `is not a valid JSON Schema: ${ajv.errorsText(ajv.errors)}.`);
  }
  return rewrite(op, param, schema, '#') as JsonSchema;
}
