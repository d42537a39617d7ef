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
import { finiteNumberEbnf, integerRangeEbnf, literalsEbnf } from './ebnf.js';
import type { JsonSchema } from './schema.js';
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
}

/** Compiled grammars kept per tokenizer. */
const KEPT_GRAMMARS = 64;

/** The longest schema or grammar text accepted, as JSON: far above any tool list a model's context could hold. */
const MAX_SPEC_CHARS = 1 << 20;

/** A per-tokenizer xgrammar compiler. */
class TokenizerGrammars {
  readonly #compiled = new Map<string, Compiled>();
  readonly #instance: XGrammarInstance;
  readonly #info: TokenizerInfo;
  readonly #compiler: GrammarCompiler;
  readonly #target: GrammarTarget;

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
      return new TokenizerGrammars(instance, info, compiler, target);
    });
  }

  get retired(): boolean {
    return this.#instance.retired;
  }

  async compile(op: string, param: string, spec: GrammarSpec): Promise<Compiled> {
    const key = JSON.stringify(spec);
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
    const grammar = await this.#instance.run(op, param, () => this.#compileNew(spec));
    const compiled: Compiled = {
      instance: this.#instance,
      grammar,
      vocabSize: this.#target.vocabSize,
      stopIds: this.#target.stopIds,
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

  async #compileNew(spec: GrammarSpec): Promise<CompiledGrammar> {
    switch (spec.kind) {
      case 'schema':
        return this.#compiler.compileGrammar(await this.#schemaEbnf(spec.schema));
      case 'grammar':
        return this.#compiler.compileGrammar(spec.grammar, spec.root ?? 'root');
      case 'structural':
        return this.#compiler.compileStructuralTag({
          type: 'structural_tag',
          format: await this.#compactJson(spec.format),
        });
    }
  }

  /**
   * The EBNF of one-line JSON valid against `schema` (", " and ": " separators, no free whitespace: a model cannot
   * pad forever), literals, bounded integers and unbounded numbers written by ebnf.ts instead of xgrammar's
   * converter.
   */
  async #schemaEbnf(schema: JsonSchema): Promise<string> {
    const { schema: placeheld, ranges } = withRangePlaceholders(schema);
    const grammar = await this.#instance.api.Grammar.fromJSONSchema(JSON.stringify(placeheld), false, -1);
    let ebnf: string;
    try {
      ebnf = grammar.toString();
    } finally {
      grammar.dispose();
    }
    for (const [token, expression] of ranges) {
      // The placeholder is a JSON string constant, so it appears as \"token\" inside a quoted literal (alone, or
      // merged with its neighbours): close the literal, put the range, reopen it.
      const quoted = `\\"${token}\\"`;
      if (!ebnf.includes(quoted)) throw new Error(`placeholder ${token} missing from the grammar`);
      ebnf = ebnf.split(quoted).join(`" ${expression} "`);
    }
    return ebnf;
  }

  /**
   * `format` with every `json_schema` element replaced by the grammar of its one-line JSON: inside structural tags,
   * xgrammar allows any whitespace between JSON tokens, and a model may then pad forever.
   */
  async #compactJson(format: StructuralTagFormat): Promise<StructuralTagFormat> {
    const visit = async (node: unknown): Promise<unknown> => {
      if (Array.isArray(node)) return Promise.all(node.map(visit));
      if (typeof node !== 'object' || node === null) return node;
      const n = node as Record<string, unknown>;
      if (n.type === 'json_schema')
        return { type: 'grammar', grammar: await this.#schemaEbnf(n.json_schema as JsonSchema) };
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
  return (await byShape.get(shape)!).compile(op, param, spec);
}

/**
 * `schema` with every `enum`, `const`, integer bounded on both sides (as schema.ts leaves every integer) and
 * `number` without bounds, `anyOf` or `$ref` (as schema.ts leaves every unbounded number) replaced by a unique string
 * constant, and the EBNF each constant stands for (see ebnf.ts).
 */
export function withRangePlaceholders(schema: JsonSchema): {
  schema: JsonSchema;
  ranges: Map<string, string>;
} {
  const ranges = new Map<string, string>();
  const nonce = Math.random()
    .toString(36)
    .slice(2, 10)
    .replace(/[^a-z0-9]/g, '');
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (typeof node !== 'object' || node === null) return node;
    const n = node as Record<string, unknown>;
    const token = `qkint${nonce}x${ranges.size}`;
    if (Array.isArray(n.enum) || n.const !== undefined) {
      const values = Array.isArray(n.enum) ? n.enum : [n.const];
      ranges.set(token, literalsEbnf(values.map((v) => JSON.stringify(v))));
      return { const: token };
    }
    if (n.type === 'integer' && typeof n.minimum === 'number' && typeof n.maximum === 'number') {
      ranges.set(token, integerRangeEbnf(n.minimum, n.maximum));
      return { const: token };
    }
    const numberKeys = ['anyOf', '$ref', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];
    if (n.type === 'number' && numberKeys.every((k) => n[k] === undefined)) {
      ranges.set(token, finiteNumberEbnf());
      return { const: token };
    }
    // Values under these keys are data, not schemas.
    return Object.fromEntries(
      Object.entries(n).map(([k, v]) => [k, k === 'enum' || k === 'const' || k === 'default' ? v : visit(v)]),
    );
  };
  return { schema: visit(schema) as JsonSchema, ranges };
}
