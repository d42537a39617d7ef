/**
 * Structured output: a JSON Schema or a grammar turned into a {@link TokenConstraint} for one generation, through
 * xgrammar (see grammar.ts, constraint.ts, xgrammar.ts).
 */
import { QkValueError } from '@qk/ops';
import { Ajv, type ValidateFunction } from 'ajv';
import { hasVocabulary } from '../tokenizer/vocabulary.js';
import { GrammarConstraint } from './constraint.js';
import { compileGrammar, type GrammarSpec, type GrammarTarget } from './grammar.js';
import { enforceableSchema, type JsonSchema } from './schema.js';

export { GrammarConstraint } from './constraint.js';
export { compileGrammar, type GrammarSpec, type GrammarTarget } from './grammar.js';
export { enforceableSchema, type JsonSchema } from './schema.js';

/** Options that restrict what a generation may produce. At most one of them. */
export interface StructuredOptions {
  /**
   * A JSON Schema the output must validate against: the generation produces one JSON value on one line
   * (`{"name": "Ada", "tags": ["x"]}`) and stops when it is complete. `true` (or `{}`) allows any JSON value; use
   * `{ "type": "object" }` for OpenAI's `json_object`. Keywords the grammar cannot enforce (`format`, `uniqueItems`,
   * `oneOf`, …) are refused rather than silently ignored, and numeric bounds are enforced on integers (a bounded
   * `number` yields the integers in its range); see `structured/schema.ts`. Numbers are always finite and short: an
   * integer without bounds is one in ±(2^53−1), a `number` without bounds has at most 16 integer digits, 16
   * fraction digits and a 2-digit exponent (a `type` array such as `["number", "null"]` gets the same per type).
   * Bound strings (`maxLength`, `pattern`, `enum`) and arrays (`maxItems`) where the text must fit in `maxTokens`: a
   * generation that reaches `maxTokens` first ends with `finishReason: 'length'` and incomplete JSON, as everywhere
   * else. Compiled once per distinct schema and tokenizer, on the main thread (a few ms to ~25 ms for typical
   * schemas; each unit of a `maxLength` about 20 ms; see the README), nothing after.
   */
  readonly schema?: JsonSchema;
  /**
   * An EBNF grammar (xgrammar's dialect, GBNF-like): rules `name ::= …`, quoted literals, character classes
   * `[a-z]`, `*` `+` `?` `{m,n}`, alternatives `|`, `#` comments; generation starts at the rule `root`.
   * Example: `root ::= ("yes" | "no") "\n"`.
   */
  readonly grammar?: string;
}

/** The spec `options` asks for, checked; `undefined` when it asks for none. */
export function structuredSpec(op: string, options: StructuredOptions | undefined): GrammarSpec | undefined {
  const schema = options?.schema;
  const grammar = options?.grammar;
  if (schema !== undefined && grammar !== undefined) {
    throw new QkValueError(op, 'schema', 'and grammar cannot be used together; pass one of them.');
  }
  if (schema !== undefined) return { kind: 'schema', schema: enforceableSchema(op, 'schema', schema) };
  if (grammar !== undefined) {
    if (typeof grammar !== 'string' || grammar.trim().length === 0) {
      throw new QkValueError(
        op,
        'grammar',
        'must be the non-empty text of an EBNF grammar with a root rule.',
      );
    }
    return { kind: 'grammar', grammar };
  }
  return undefined;
}

/** What a grammar compiled for `tokenizer` and a model of `vocabSize` rows needs. */
export function grammarTarget(
  op: string,
  tokenizer: unknown,
  vocabSize: number,
  stopIds: Iterable<number>,
): GrammarTarget {
  if (!hasVocabulary(tokenizer)) {
    throw new QkValueError(
      op,
      'tokenizer',
      'cannot list its pieces (no vocabulary() method), which structured output needs to build token masks; use the tokenizer loadQwen3 loads.',
    );
  }
  return { vocabulary: tokenizer.vocabulary(), vocabSize, stopIds: [...stopIds] };
}

/** Compiles `spec` for `target` and starts a constraint at its beginning. `param` names the option in errors. */
export async function createConstraint(
  op: string,
  param: string,
  spec: GrammarSpec,
  target: GrammarTarget,
): Promise<GrammarConstraint> {
  return GrammarConstraint.create(await compileGrammar(op, param, spec, target), param);
}

const ajv = new Ajv({ strict: false });
const validators = new WeakMap<object, ValidateFunction>();

/**
 * The last line of defence behind the grammar: a finished (`'stop'`) structured result whose answer does not parse
 * or validate against `schema` is an error, never returned as if it were valid. A reply cut by `maxTokens` is left
 * as it is (its finish reason says so).
 *
 * @throws QkValueError naming `param` when the grammar engine let invalid text through.
 */
export function checkStructuredOutput(
  param: string,
  schema: JsonSchema,
  result: {
    readonly text: string;
    readonly content?: string;
    readonly stats: { readonly finishReason: string };
  },
): void {
  if (result.stats.finishReason !== 'stop' || typeof schema !== 'object') return;
  const text = result.content ?? result.text;
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (value === undefined || !(validate(value) as boolean)) {
    throw new QkValueError(
      'structured output',
      param,
      `was not met by the text the grammar engine allowed (${JSON.stringify(text.slice(0, 200))}${value === undefined ? ' does not parse' : `: ${ajv.errorsText(validate.errors)}`}); this is a grammar-engine defect: please report it with the schema.`,
    );
  }
}
