/**
 * Compiling what a generation must produce (a JSON Schema, an EBNF grammar, or xgrammar's structural tags for tool
 * calls and thinking) against one tokenizer's vocabulary. The vocabulary is preprocessed once per tokenizer and
 * model vocabulary size; compiled grammars are kept per tokenizer (most recently used first), so a server that
 * sees the same `response_format` or tool list again pays nothing for it.
 */
import type {
  CompiledGrammar,
  GrammarCompiler,
  StructuralTagFormat,
  TokenizerInfo,
} from '@mlc-ai/web-xgrammar';
import { QkValueError } from '@qk/ops';
import type { TokenVocabulary } from '../tokenizer/vocabulary.js';
import {
  boundedStringEbnf,
  boundedStringShape,
  type EbnfFragment,
  finiteNumberEbnf,
  integerRangeEbnf,
  type LengthSiteShape,
  lengthSiteEbnf,
  literalsEbnf,
  patternEbnf,
  patternSiteShape,
} from './ebnf.js';
import { type JsonSchema, PLAIN_CHAR } from './schema.js';
import { type CompiledSites, SiteMarks, type SiteTable, siteTable } from './sites.js';
import { loadXGrammar, type XGrammarInstance } from './xgrammar.js';

/** What a constrained generation must produce. */
export type GrammarSpec =
  /** JSON that validates against `schema` (already made enforceable, see schema.ts), on one line. */
  | { readonly kind: 'schema'; readonly schema: JsonSchema }
  /**
   * Text of an EBNF grammar in xgrammar's dialect (GBNF-like: `root ::= "yes" | "no"`, character classes,
   * `*`/`+`/`?`, `#` comments); `root` names the start rule (default `root`).
   */
  | { readonly kind: 'grammar'; readonly grammar: string; readonly root?: string }
  /** xgrammar's structural-tag format (tags, triggers, sequences): tool calls and a thinking block use it. */
  | { readonly kind: 'structural'; readonly format: StructuralTagFormat };

/** The facts about a model a compiled grammar depends on. */
export interface GrammarTarget {
  /** The tokenizer's pieces (see {@link TokenVocabulary}). */
  readonly vocabulary: TokenVocabulary;
  /** Rows of the model's LM head: masks cover them all (ids past the tokenizer's are never allowed). */
  readonly vocabSize: number;
  /** Ids that end a generation: allowed exactly when the grammar is complete. */
  readonly stopIds: readonly number[];
}

/** A compiled grammar and what a matcher over it needs. */
export interface Compiled {
  readonly instance: XGrammarInstance;
  readonly grammar: CompiledGrammar;
  readonly vocabSize: number;
  readonly stopIds: readonly number[];
  /** The vocabulary's per-piece facts (bytes, UTF-8 masks; sites.ts). */
  readonly pieces: SiteTable;
  /** Strings whose length the constraint keeps instead of the grammar (sites.ts); absent when there are none. */
  readonly sites?: CompiledSites;
}

/** How to compile (tests compare the two forms). */
export interface CompileOptions {
  /**
   * Keep strings of bounded length as length sites (sites.ts): one grammar position each instead of one per count.
   * Default true; false writes every count into the grammar (the form the sites are tested against).
   */
  readonly lengthSites?: boolean;
}

/** Compiled grammars kept per tokenizer. */
const KEPT_GRAMMARS = 64;

/** The longest schema or grammar text accepted, as JSON: far above any tool list a model's context could hold. */
const MAX_SPEC_CHARS = 1 << 20;

/**
 * What the per-tokenizer setup compiles once to warm xgrammar's code up (see `#warmUp`): free strings, a bounded
 * repetition, an integer range, an enum, an array of numbers and a nested object, as users' schemas have them
 * (already in the form schema.ts gives the grammar).
 */
const WARM_UP_SCHEMA: JsonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    id: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    state: { enum: ['open', 'closed'] },
    scores: { type: 'array', items: { type: 'number' }, maxItems: 2 },
    owner: {
      type: 'object',
      properties: { login: { type: 'string', pattern: '^[a-z][a-z0-9-]{0,7}$' } },
      required: ['login'],
      additionalProperties: false,
    },
  },
  required: ['name', 'id', 'state', 'owner'],
  additionalProperties: false,
};

/** A per-tokenizer xgrammar compiler. */
class TokenizerGrammars {
  readonly #compiled = new Map<string, Compiled>();
  readonly #instance: XGrammarInstance;
  readonly #info: TokenizerInfo;
  readonly #compiler: GrammarCompiler;
  readonly #target: GrammarTarget;
  /** Per-piece facts of the vocabulary: length sites and UTF-8 masks (sites.ts). */
  readonly #pieces: SiteTable;

  private constructor(
    instance: XGrammarInstance,
    info: TokenizerInfo,
    compiler: GrammarCompiler,
    target: GrammarTarget,
  ) {
    this.#instance = instance;
    this.#info = info;
    this.#compiler = compiler;
    this.#target = target;
    this.#pieces = siteTable(target.vocabulary, target.vocabSize);
  }

  static async create(target: GrammarTarget): Promise<TokenizerGrammars> {
    const instance = loadXGrammar();
    const { api } = instance;
    return instance.run('structured output', 'tokenizer', async () => {
      const info = await api.TokenizerInfo.createTokenizerInfo(
        [...target.vocabulary.pieces],
        target.vocabulary.encoding,
        false,
        target.vocabSize,
        [...target.stopIds],
      );
      // xgrammar's own cache would keep every grammar forever; ours keeps the most recent KEPT_GRAMMARS.
      const compiler = await api.GrammarCompiler.createGrammarCompiler(info, false);
      const grammars = new TokenizerGrammars(instance, info, compiler, target);
      await grammars.#warmUp();
      return grammars;
    });
  }

  /**
   * Compiles {@link WARM_UP_SCHEMA} and reads a mask from it, discarding both. V8 runs WebAssembly in its baseline
   * tier first and recompiles a function optimised only once it has run a while: measured on a 2-core machine, the
   * first ~15 new grammars after the tokenizer's setup compiled 2–3× slower than later ones (a flat schema 45–100 ms,
   * then ~20 ms). This one compile (~0.1 s, part of the setup) exercises the code every schema compile runs.
   */
  async #warmUp(): Promise<void> {
    const grammar = await this.#compiler.compileGrammar(
      await this.#schemaEbnf(WARM_UP_SCHEMA, SiteMarks.for(this.#pieces)),
    );
    try {
      const matcher = await this.#instance.api.GrammarMatcher.createGrammarMatcher(grammar, [
        ...this.#target.stopIds,
      ]);
      await matcher.getNextTokenBitmask();
      matcher.dispose();
      // The per-count bitsets of length sites and the masks of every UTF-8 state (~40 ms together), so that a
      // generation's first site or first character split across pieces does not wait for them.
      this.#pieces.lengthMask(0, 0);
      this.#pieces.warmUtf8();
    } finally {
      grammar.dispose();
    }
  }

  get retired(): boolean {
    return this.#instance.retired;
  }

  async compile(op: string, param: string, spec: GrammarSpec, options?: CompileOptions): Promise<Compiled> {
    const lengthSites = options?.lengthSites ?? true;
    const key = `${lengthSites ? 's' : 'x'}${JSON.stringify(spec)}`;
    if (key.length > MAX_SPEC_CHARS) {
      throw new QkValueError(
        op,
        param,
        `is ${key.length} characters long; at most ${MAX_SPEC_CHARS} are accepted.`,
      );
    }
    const kept = this.#compiled.get(key);
    if (kept !== undefined) {
      this.#compiled.delete(key);
      this.#compiled.set(key, kept);
      return kept;
    }
    const marks = lengthSites ? SiteMarks.for(this.#pieces) : undefined;
    const grammar = await this.#instance.run(op, param, () => this.#compileNew(spec, marks));
    const sites = marks?.compiled();
    const compiled: Compiled = {
      instance: this.#instance,
      grammar,
      vocabSize: this.#target.vocabSize,
      stopIds: this.#target.stopIds,
      pieces: this.#pieces,
      ...(sites === undefined ? {} : { sites }),
    };
    this.#compiled.set(key, compiled);
    if (this.#compiled.size > KEPT_GRAMMARS) {
      const [oldest] = this.#compiled.keys();
      // Matchers made from it hold their own reference inside xgrammar; only our handle goes.
      this.#compiled.get(oldest!)!.grammar.dispose();
      this.#compiled.delete(oldest!);
    }
    return compiled;
  }

  async #compileNew(spec: GrammarSpec, marks: SiteMarks | undefined): Promise<CompiledGrammar> {
    switch (spec.kind) {
      case 'schema':
        return this.#compiler.compileGrammar(await this.#schemaEbnf(spec.schema, marks));
      case 'grammar':
        return this.#compiler.compileGrammar(spec.grammar, spec.root ?? 'root');
      case 'structural':
        return this.#compiler.compileStructuralTag({
          type: 'structural_tag',
          format: await this.#compactJson(spec.format, marks),
        });
    }
  }

  /**
   * The EBNF of one-line JSON valid against `schema` (", " and ": " separators, no free whitespace: a model cannot
   * pad forever), literals, bounded integers and unbounded numbers written by ebnf.ts instead of xgrammar's
   * converter; strings of bounded length as length sites with `marks` (sites.ts), else with every count written.
   */
  async #schemaEbnf(schema: JsonSchema, marks: SiteMarks | undefined): Promise<string> {
    const { schema: placeheld, ranges } = withRangePlaceholders(schema, marks);
    const grammar = await this.#instance.api.Grammar.fromJSONSchema(JSON.stringify(placeheld), false, -1);
    let ebnf: string;
    try {
      ebnf = grammar.toString();
    } finally {
      grammar.dispose();
    }
    const rules: string[] = [];
    for (const [token, { expression, rules: own }] of ranges) {
      // The placeholder is a JSON string constant, so it appears as \"token\" inside a quoted literal (alone, or
      // merged with its neighbours): close the literal, put the range, reopen it.
      const quoted = `\\"${token}\\"`;
      if (!ebnf.includes(quoted)) throw new Error(`placeholder ${token} missing from the grammar`);
      ebnf = ebnf.split(quoted).join(`" ${expression} "`);
      rules.push(...own);
    }
    return [withCheapStrings(ebnf), ...rules].join('\n');
  }

  /**
   * `format` with every `json_schema` element replaced by the grammar of its one-line JSON: inside structural tags,
   * xgrammar allows any whitespace between JSON tokens, and a model may then pad forever.
   */
  async #compactJson(
    format: StructuralTagFormat,
    marks: SiteMarks | undefined,
  ): Promise<StructuralTagFormat> {
    const visit = async (node: unknown): Promise<unknown> => {
      if (Array.isArray(node)) return Promise.all(node.map(visit));
      if (typeof node !== 'object' || node === null) return node;
      const n = node as Record<string, unknown>;
      if (n.type === 'json_schema')
        return { type: 'grammar', grammar: await this.#schemaEbnf(n.json_schema as JsonSchema, marks) };
      return Object.fromEntries(
        await Promise.all(Object.entries(n).map(async ([k, v]) => [k, await visit(v)])),
      );
    };
    return (await visit(format)) as StructuralTagFormat;
  }

  dispose(): void {
    for (const compiled of this.#compiled.values()) compiled.grammar.dispose();
    this.#compiled.clear();
    this.#compiler.dispose();
    this.#info.dispose();
  }
}

/** Compilers per vocabulary object and model shape; a retired xgrammar instance is replaced on next use. */
const compilers = new WeakMap<TokenVocabulary, Map<string, Promise<TokenizerGrammars>>>();

/**
 * Compiles `spec` for `target`, reusing the tokenizer's preprocessed vocabulary and any identical grammar compiled
 * before.
 *
 * @throws QkValueError naming `param` when the grammar engine rejects the spec (an unsupported schema keyword, an
 *   EBNF syntax error), with its reason.
 */
export async function compileGrammar(
  op: string,
  param: string,
  spec: GrammarSpec,
  target: GrammarTarget,
  options?: CompileOptions,
): Promise<Compiled> {
  let byShape = compilers.get(target.vocabulary);
  if (byShape === undefined) {
    byShape = new Map();
    compilers.set(target.vocabulary, byShape);
  }
  const shape = `${target.vocabSize}|${[...target.stopIds].sort((a, b) => a - b).join(',')}`;
  const seen = byShape.get(shape);
  const current = seen === undefined ? undefined : await seen.catch(() => undefined);
  if (current === undefined || current.retired) {
    // A retired instance is dropped whole (its WebAssembly memory goes with the last matcher using it); calls into
    // an aborted runtime, dispose included, are what retiring avoids. Concurrent callers share one replacement.
    if (byShape.get(shape) === seen) byShape.set(shape, TokenizerGrammars.create(target));
  }
  return (await byShape.get(shape)!).compile(op, param, spec, options);
}

/** `[min, max]` of a pattern schema.ts writes for string lengths (`^[^"\\…]{min,max}$`); else `undefined`. */
function plainLengths(pattern: unknown): [number, number | undefined] | undefined {
  const head = `^${PLAIN_CHAR}{`;
  if (typeof pattern !== 'string' || !pattern.startsWith(head)) return undefined;
  const counts = /^(\d+),(\d*)\}\$$/.exec(pattern.slice(head.length));
  if (counts === null) return undefined;
  return [Number(counts[1]), counts[2] === '' ? undefined : Number(counts[2])];
}

/**
 * Whether `node` may match a JSON string: a site beside such an alternative would be inside two strings at once,
 * and the constraint keeps one count (sites.ts).
 */
function mayBeString(node: unknown): boolean {
  if (typeof node !== 'object' || node === null) return node !== false;
  const n = node as Record<string, unknown>;
  if (typeof n.type === 'string') return n.type === 'string';
  const values = Array.isArray(n.enum) ? n.enum : n.const !== undefined ? [n.const] : undefined;
  if (values !== undefined) return values.some((v) => typeof v === 'string');
  return true;
}

/**
 * `schema` with every string of bounded length (the pattern schema.ts writes for `minLength`/`maxLength`), every
 * other `pattern` in the subset ebnf.ts's `patternEbnf` converts, `enum`,
 * `const`, integer bounded on both sides (as schema.ts leaves every integer) and
 * `number` without bounds, `anyOf` or `$ref` (as schema.ts leaves every unbounded number) replaced by a unique string
 * constant, and the EBNF each constant stands for (see ebnf.ts).
 *
 * With `marks`, a bounded-length string and a pattern of fixed characters around one bounded repetition become
 * length sites (sites.ts), except where the constraint could not tell which count applies: inside definitions
 * (`$defs`, reachable from anywhere through `$ref`) and in an `anyOf` with more than one branch that may be a
 * string. Without a mark left, the count is written into the grammar as without `marks`.
 */
export function withRangePlaceholders(
  schema: JsonSchema,
  marks?: SiteMarks,
): {
  schema: JsonSchema;
  ranges: Map<string, EbnfFragment>;
} {
  const ranges = new Map<string, EbnfFragment>();
  const nonce = Math.random()
    .toString(36)
    .slice(2, 10)
    .replace(/[^a-z0-9]/g, '');
  // One rule per distinct shape in this grammar text.
  const siteRules = new Map<string, EbnfFragment>();
  const site = (shape: LengthSiteShape | undefined, exact: boolean): EbnfFragment | undefined => {
    if (shape === undefined || exact || marks === undefined) return undefined;
    const byte = marks.markFor(shape);
    if (byte === undefined) return undefined;
    const key = JSON.stringify(shape);
    let fragment = siteRules.get(key);
    if (fragment === undefined) {
      fragment = lengthSiteEbnf(shape, `qksite${nonce}x${siteRules.size}`, byte);
      siteRules.set(key, fragment);
      return fragment;
    }
    return { expression: fragment.expression, rules: [] };
  };
  const visit = (node: unknown, exact: boolean): unknown => {
    if (Array.isArray(node)) return node.map((v) => visit(v, exact));
    if (typeof node !== 'object' || node === null) return node;
    const n = node as Record<string, unknown>;
    const token = `qkint${nonce}x${ranges.size}`;
    if (Array.isArray(n.enum) || n.const !== undefined) {
      const values = Array.isArray(n.enum) ? n.enum : [n.const];
      ranges.set(token, { expression: literalsEbnf(values.map((v) => JSON.stringify(v))), rules: [] });
      return { const: token };
    }
    const lengths = n.type === 'string' ? plainLengths(n.pattern) : undefined;
    if (lengths !== undefined) {
      const [min, max] = lengths;
      ranges.set(
        token,
        site(max === undefined ? undefined : boundedStringShape(min, max), exact) ??
          boundedStringEbnf(min, max, token),
      );
      return { const: token };
    }
    const patterned =
      n.type === 'string' &&
      typeof n.pattern === 'string' &&
      ['anyOf', '$ref'].every((k) => n[k] === undefined);
    const own = patterned
      ? (site(patternSiteShape(n.pattern as string), exact) ?? patternEbnf(n.pattern as string, token))
      : undefined;
    if (own !== undefined) {
      ranges.set(token, own);
      return { const: token };
    }
    if (n.type === 'integer' && typeof n.minimum === 'number' && typeof n.maximum === 'number') {
      ranges.set(token, integerRangeEbnf(n.minimum, n.maximum, token));
      return { const: token };
    }
    const numberKeys = ['anyOf', '$ref', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];
    if (n.type === 'number' && numberKeys.every((k) => n[k] === undefined)) {
      ranges.set(token, { expression: finiteNumberEbnf(), rules: [] });
      return { const: token };
    }
    // Values under these keys are data, not schemas.
    return Object.fromEntries(
      Object.entries(n).map(([k, v]) => {
        if (k === 'enum' || k === 'const' || k === 'default') return [k, v];
        const inside =
          exact ||
          k === '$defs' ||
          k === 'definitions' ||
          (k === 'anyOf' && Array.isArray(v) && v.filter(mayBeString).length > 1);
        return [k, visit(v, inside)];
      }),
    );
  };
  return { schema: visit(schema, false) as JsonSchema, ranges };
}

/** The free-string content rule xgrammar 0.1.27's JSON Schema converter writes (one line of `Grammar#toString()`). */
export const XGRAMMAR_STRING_RULE =
  'basic_string_sub ::= (("\\"") | ([^\\0-\\x1f\\"\\\\\\r\\n] basic_string_sub) | ("\\\\" basic_escape basic_string_sub)) (=([ \\n\\t]* [,}\\]:]))';

/**
 * The same language (a JSON string's characters after its opening quote, through the closing quote) as one rule
 * whose alternatives are sequences of characters and byte strings, which xgrammar compiles into a finite automaton:
 * the run of plain characters is a loop on one state, and the rule refers only to itself, after an escape. The
 * converter's right-recursive form (a character, then the rule again) makes the vocabulary scan that builds the
 * rule's token masks step through a rule expansion per character: ~35 ms per new grammar with Qwen3's vocabulary,
 * against ~13 ms for this one (see DESIGN.md). The lookahead is the converter's.
 */
export const CHEAP_STRING_RULE = (() => {
  const plain = '[^\\0-\\x1f\\"\\\\]*';
  const hex = '[A-Fa-f0-9]';
  return `basic_string_sub ::= ((${plain} "\\"") | (${plain} "\\\\" [\\"\\\\/bfnrt] basic_string_sub) | (${plain} "\\\\u" ${hex} ${hex} ${hex} ${hex} basic_string_sub)) (=([ \\n\\t]* [,}\\]:]))`;
})();

/** `ebnf` with xgrammar's free-string rule replaced by {@link CHEAP_STRING_RULE}, where it has that rule. */
export function withCheapStrings(ebnf: string): string {
  return ebnf
    .split('\n')
    .map((line) => (line === XGRAMMAR_STRING_RULE ? CHEAP_STRING_RULE : line))
    .join('\n');
}
