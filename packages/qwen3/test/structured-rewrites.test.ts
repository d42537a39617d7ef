/**
 * The grammar rewrites that exist for compile time (structured/DESIGN.md, costs): each must describe the same
 * language as the form it replaces. The free-string rule is checked against JSON's string syntax by brute force
 * in xgrammar's string acceptor, and against xgrammar's own rule token mask by token mask along random paths; the
 * integer automaton's states are shared (its exactness is checked in structured.test.ts).
 */
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { toolCallSpec } from '../src/chat/tools.js';
import { PRESETS } from '../src/config.js';
import { GrammarConstraint } from '../src/structured/constraint.js';
import { boundedStringEbnf, fragmentGrammar, integerRangeEbnf, patternEbnf } from '../src/structured/ebnf.js';
import {
  CHEAP_STRING_RULE,
  compileGrammar,
  type GrammarTarget,
  withCheapStrings,
  XGRAMMAR_STRING_RULE,
} from '../src/structured/grammar.js';
import { grammarTarget, structuredSpec } from '../src/structured/index.js';
import type { JsonSchema } from '../src/structured/schema.js';
import { loadXGrammar } from '../src/structured/xgrammar.js';
import { loadTokenizer } from '../src/tokenizer/index.js';
import type { Qwen3Tokenizer, ToolDefinition } from '../src/types.js';
import { allowedIds } from './support/constrained-sampler.js';
import { seededRandom } from './support/random-schema.js';

const config = PRESETS.tiny;
let tokenizer: Qwen3Tokenizer;
let target: GrammarTarget;

beforeAll(async () => {
  tokenizer = await loadTokenizer({ eosTokenIds: config.eosTokenIds });
  target = grammarTarget('test', tokenizer, config.vocabSize, tokenizer.stopIds);
});

/** The escape rule xgrammar's converter writes beside its string rule. */
const ESCAPE_RULE =
  'basic_escape ::= (([\\"\\\\/bfnrt]) | ("u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]))';

/** A JSON string literal, as RFC 8259 defines it. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: excluding control characters is the point.
const JSON_STRING = /^"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"$/;

type Compiled = Awaited<ReturnType<typeof compileGrammar>>;

/**
 * One random path through two compiled forms of one language (xgrammar's `a`, our rewrite `b`) in lockstep, each
 * through the constraint a generation uses (with its UTF-8 and length-site narrowing): at each of up to `maxSteps`
 * steps the two token masks must be equal word for word. Where neither form has length sites, the matchers' own
 * masks (before any narrowing) must be equal too. `next` gets the ids the mask allows, the ids so far and the step's
 * label, and returns the id both must accept, or null to end the path (after checking the finished text). Returns
 * the steps whose masks were compared.
 */
async function walkInLockstep(
  a: Compiled,
  b: Compiled,
  maxSteps: number,
  label: string,
  next: (allowed: number[], ids: readonly number[], where: string) => number | null,
): Promise<number> {
  const ca = await GrammarConstraint.create(a, 'a');
  const cb = await GrammarConstraint.create(b, 'b');
  const raw = (c: Compiled) => c.instance.api.GrammarMatcher.createGrammarMatcher(c.grammar, [...c.stopIds]);
  const matchers = a.sites === undefined && b.sites === undefined ? [await raw(a), await raw(b)] : [];
  const ids: number[] = [];
  let steps = 0;
  const expectEqual = (maskA: ArrayLike<number>, maskB: ArrayLike<number>, where: string) => {
    expect(maskB.length, where).toBe(maskA.length);
    const differs = Array.prototype.findIndex.call(maskA, (word: number, i: number) => word !== maskB[i]);
    expect(differs, `${where}: masks differ in word ${differs}`).toBe(-1);
  };
  try {
    for (let step = 0; step < maxSteps; step++) {
      await Promise.all([ca.ready(), cb.ready()]);
      const [maskA, maskB] = [ca.nextMask(), cb.nextMask()];
      const where = `${label}, after ${JSON.stringify(tokenizer.decode(ids))}`;
      expectEqual(maskA, maskB, where);
      if (matchers.length > 0) {
        const [rawA, rawB] = await Promise.all(matchers.map((m) => m.getNextTokenBitmask()));
        expectEqual(rawA!, rawB!, `${where} (matchers' own masks)`);
      }
      steps++;
      const id = next(allowedIds(maskA, maskA.length * 32), ids, where);
      if (id === null) break;
      ca.accept(id);
      cb.accept(id);
      for (const m of matchers) expect(m.acceptToken(id), where).toBe(true);
      ids.push(id);
    }
  } finally {
    ca.dispose();
    cb.dispose();
    for (const m of matchers) m.dispose();
  }
  return steps;
}

describe('the free-string rule', () => {
  it("replaces the converter's rule in a schema's grammar", async () => {
    const { api } = loadXGrammar();
    const grammar = await api.Grammar.fromJSONSchema('{"type": "string"}', false, -1);
    const ebnf = grammar.toString();
    grammar.dispose();
    // Fails when an xgrammar upgrade writes its rule differently: the rewrite would silently stop applying.
    expect(ebnf.split('\n')).toContain(XGRAMMAR_STRING_RULE);
    const rewritten = withCheapStrings(ebnf).split('\n');
    expect(rewritten).toContain(CHEAP_STRING_RULE);
    expect(rewritten).not.toContain(XGRAMMAR_STRING_RULE);
  });

  it('accepts exactly the JSON string literals: every text of up to 4 characters over an alphabet of its edge cases', async () => {
    const { api } = loadXGrammar();
    const grammarOf = async (rule: string) =>
      api.Grammar.fromEBNF(['root ::= "\\"" basic_string_sub', rule, ESCAPE_RULE].join('\n'));
    const cheap = await grammarOf(CHEAP_STRING_RULE);
    const theirs = await grammarOf(XGRAMMAR_STRING_RULE);
    // Quote, backslash, each escape letter, hex digits, a control character, non-ASCII of 2 and 3 bytes.
    const alphabet = ['"', '\\', 'n', 'u', 'A', '0', '\t', 'é', '中'];
    const texts = [''];
    for (let layer = [''], n = 1; n <= 4; n++) {
      layer = layer.flatMap((text) => alphabet.map((c) => text + c));
      texts.push(...layer);
    }
    texts.push('\\u00e9"', '\\u00E9x"', '\\u00g9"', '\\/"', '\\b\\f\\r\\t"', '\\x"', '中文 ünï"');
    let accepted = 0;
    for (const tail of texts) {
      const text = `"${tail}`;
      const want = JSON_STRING.test(text);
      expect(await api.Testings.isGrammarAcceptString(cheap, text), JSON.stringify(text)).toBe(want);
      accepted += want ? 1 : 0;
    }
    // The converter's rule agrees on a sample (all of it would double the test's time).
    for (const tail of texts.filter((_, i) => i % 7 === 0)) {
      const text = `"${tail}`;
      expect(await api.Testings.isGrammarAcceptString(theirs, text), JSON.stringify(text)).toBe(
        JSON_STRING.test(text),
      );
    }
    expect(accepted).toBeGreaterThan(100);
    cheap.dispose();
    theirs.dispose();
  }, 120_000);

  it("gives the same token masks as the converter's rule at every step of random paths through schemas with free strings", async () => {
    const { api } = loadXGrammar();
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const stopIds = new Set(tokenizer.stopIds);
    const { pieces } = target.vocabulary;
    // Byte-level pieces spell ASCII as itself: these ids write a quote, which may end a string.
    const quoting = new Set(pieces.flatMap((piece, id) => (piece.includes('"') ? [id] : [])));
    const schemas = [
      {
        type: 'object',
        properties: {
          a: { type: 'string' },
          b: { type: 'array', items: { type: 'string' }, maxItems: 3 },
          c: { type: 'integer', minimum: 0, maximum: 9 },
        },
        required: ['a', 'b', 'c'],
        additionalProperties: false,
      },
      // Unlisted properties: keys are free strings too, and values any JSON.
      { type: 'object', properties: { k: { type: 'string' } }, required: ['k'], additionalProperties: true },
    ];
    const ajv = new Ajv({ strict: false });
    let steps = 0;
    let ended = 0;
    for (const schema of schemas) {
      const source = await api.Grammar.fromJSONSchema(JSON.stringify(schema), false, -1);
      const theirs = source.toString();
      source.dispose();
      const ours = withCheapStrings(theirs);
      expect(ours).not.toBe(theirs);
      const compile = (grammar: string) =>
        compileGrammar('test', 'grammar', { kind: 'grammar', grammar }, target);
      const [a, b] = [await compile(theirs), await compile(ours)];
      for (let w = 0; w < 8; w++) {
        steps += await walkInLockstep(
          a,
          b,
          80,
          `seed ${seed}, ${JSON.stringify(schema)}`,
          (allowed, ids, where) => {
            const stops = allowed.filter((id) => stopIds.has(id));
            if (stops.length > 0 && (stops.length === allowed.length || rand() < 0.3)) {
              ended++;
              const value = JSON.parse(tokenizer.decode(ids));
              expect(ajv.validate(schema, value), where).toBe(true);
              return null;
            }
            // Half the time a token that writes a quote, so strings end and the paths go on past them.
            const going = allowed.filter((id) => !stopIds.has(id));
            const closing = going.filter((id) => quoting.has(id));
            const from = closing.length > 0 && rand() < 0.5 ? closing : going;
            return from[Math.floor(rand() * from.length)]!;
          },
        );
      }
    }
    expect(steps).toBeGreaterThan(200);
    expect(ended).toBeGreaterThan(0);
  }, 240_000);
});

describe('integer ranges', () => {
  it('share automaton states: one rule per distinct state, a few dozen for the widest ranges', () => {
    const safe = Number.MAX_SAFE_INTEGER;
    // Written as one nested expression, [1, 2^53−1] was 182 parenthesised groups (one xgrammar rule each).
    expect(integerRangeEbnf(1, safe, 'r').rules.length).toBeLessThanOrEqual(40);
    // The negative magnitudes reuse the positive ones' states.
    expect(integerRangeEbnf(-safe, safe, 'r').rules.length).toBeLessThanOrEqual(40);
    const small = integerRangeEbnf(0, 150, 'r');
    expect(small).toEqual({
      expression: '(r_3)',
      rules: [
        'r_0 ::= "" | [0-9]',
        'r_1 ::= "" | "0"',
        'r_2 ::= "" | [0-4] r_0 | "5" r_1 | [6-9]',
        'r_3 ::= "0" | "1" r_2 | [2-9] r_0',
      ],
    });
  });
});

describe('strings of bounded length', () => {
  const cases: [number, number | undefined][] = [
    [0, 0],
    [0, 3],
    [2, 3],
    [1, undefined],
    [0, 8],
    [3, 11],
    [0, 17],
  ];

  it('accept exactly the JSON strings of min to max unescaped characters (code points), quotes included', async () => {
    const { api } = loadXGrammar();
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    // A 2-byte and a 3-byte character, and what must not appear unescaped.
    const alphabet = ['a', 'é', '中', ' ', '"', '\\', '\t'];
    for (const [min, max] of cases) {
      const grammar = await api.Grammar.fromEBNF(fragmentGrammar(boundedStringEbnf(min, max, 's')));
      const want = new RegExp(`^"[^"\\\\\\u0000-\\u001f]{${min},${max ?? ''}}"$`, 'u');
      const texts = new Set<string>();
      // Every text up to 3 characters, then random ones of each length up to max + 2.
      for (let layer = [''], n = 0; n <= 3; n++) {
        for (const t of layer) texts.add(`"${t}"`);
        layer = layer.flatMap((t) => alphabet.map((c) => t + c));
      }
      for (let n = 0; n <= (max ?? 12) + 2; n++) {
        for (let i = 0; i < 6; i++) {
          const body = Array.from({ length: n }, () => alphabet[Math.floor(rand() * (i < 3 ? 4 : 7))]).join(
            '',
          );
          texts.add(`"${body}"`).add(`"${body}`).add(`"${body}""`);
        }
      }
      for (const text of texts) {
        expect(
          await api.Testings.isGrammarAcceptString(grammar, text),
          `{${min},${max}} ${JSON.stringify(text)}`,
        ).toBe(want.test(text));
      }
      grammar.dispose();
    }
  }, 120_000);

  it("give the same token masks as xgrammar's own length pattern at every step of random paths", async () => {
    const { api } = loadXGrammar();
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const stopIds = new Set(tokenizer.stopIds);
    for (const [min, max] of cases) {
      const schema = {
        type: 'string',
        ...(min > 0 ? { minLength: min } : {}),
        ...(max !== undefined ? { maxLength: max } : {}),
      };
      const spec = structuredSpec('test', { schema }) as { schema: object };
      // xgrammar's form of the same language: its conversion of the pattern schema.ts writes.
      const source = await api.Grammar.fromJSONSchema(JSON.stringify(spec.schema), false, -1);
      const theirs = source.toString();
      source.dispose();
      const compile = (grammar: string) =>
        compileGrammar('test', 'grammar', { kind: 'grammar', grammar }, target);
      const [a, b] = [await compile(theirs), await compileGrammar('test', 'schema', spec as never, target)];
      for (let w = 0; w < 4; w++) {
        await walkInLockstep(a, b, 40, `seed ${seed}, {${min},${max}}`, (allowed, ids, where) => {
          const going = allowed.filter((id) => !stopIds.has(id));
          if (going.length === 0 || (going.length < allowed.length && rand() < 0.2)) {
            const text = tokenizer.decode(ids);
            expect(
              JSON.parse(text).length >= min && (max === undefined || [...JSON.parse(text)].length <= max),
              where,
            ).toBe(true);
            return null;
          }
          return going[Math.floor(rand() * going.length)]!;
        });
      }
    }
  }, 240_000);
});

describe('patterns', () => {
  // Each with texts near its bounds; the brute force adds every short text over the alphabet.
  const cases: [string, string[]][] = [
    ['^[a-z][a-z0-9-]{0,15}$', ['a'.repeat(15), 'a'.repeat(16), 'a'.repeat(17), `a${'-9'.repeat(8)}`]],
    ['^[a-z]{1,3}\\d?$', ['abc9', 'abcd', 'ab99']],
    ['^(?:ab|c[0-9])+$', ['abc0ab', 'c9c9c9c9', 'abc']],
    ['^(a|ab)c?$', ['abc', 'ac', 'abcc']],
    ['[A-Z]{2}-\\d{3,}', ['ZA-000', 'ZA-0000000000', 'ZA-00']],
    ['^x(yz){1,3}$', ['xyzyzyz', 'xyzyzyzyz', 'xyzy']],
    ['^\\.[_a-z]*$', ['._', '.a_b', '..']],
    ['^(?:x|y|)z{0,17}$', ['z'.repeat(17), `x${'z'.repeat(17)}`, 'z'.repeat(18)]],
    ['^[^a-c"\\\\\\u0000-\\u001f]{2,9}\\w{3}$', ['zzzzzzzzz___', 'é中x___', 'zzzzzzzzzz___']],
    ['^[A-Z]{2}-\\d{1,6}$', ['AB-1', 'AB-123456', 'AB-1234567', 'AB-']],
  ];

  it('leave patterns outside the subset to xgrammar', () => {
    for (const pattern of [
      '^.{1,3}$',
      '^[é中]$',
      '^a*?$',
      '^(?=a)a$',
      '^\\bx$',
      '^a$b',
      '^[\\u00e9]$',
      '^\\p{L}$',
    ]) {
      expect(patternEbnf(pattern, 'p'), pattern).toBeUndefined();
    }
    for (const [pattern] of cases) expect(patternEbnf(pattern, 'p'), pattern).toBeDefined();
  });

  it('accept exactly the strings the pattern matches in full: every text of up to 3 characters over an alphabet, and texts near the bounds', async () => {
    const { api } = loadXGrammar();
    const alphabet = ['a', 'b', 'c', 'z', 'x', 'y', 'A', 'Z', '0', '9', '-', '.', '_', 'é'];
    const short = [''];
    for (let layer = [''], n = 1; n <= 3; n++) {
      layer = layer.flatMap((text) => alphabet.map((c) => text + c));
      short.push(...layer);
    }
    for (const [pattern, near] of cases) {
      const fragment = patternEbnf(pattern, 'p')!;
      const ours = await api.Grammar.fromEBNF(fragmentGrammar(fragment));
      const source = await api.Grammar.fromJSONSchema(JSON.stringify({ type: 'string', pattern }), false, -1);
      const theirs = await api.Grammar.fromEBNF(source.toString());
      source.dispose();
      const regex = new RegExp(`^(?:${pattern.replace(/^\^/, '').replace(/\$$/, '')})$`, 'u');
      const texts = [...short, ...near, ...near.map((t) => `${t}a`), ...near.map((t) => t.slice(1))];
      let matched = 0;
      for (const [i, text] of texts.entries()) {
        const want = regex.test(text);
        matched += want ? 1 : 0;
        const json = JSON.stringify(text);
        expect(await api.Testings.isGrammarAcceptString(ours, json), `${pattern} ${json}`).toBe(want);
        // xgrammar's own conversion agrees (a sample: all of it would double the test's time).
        if (i % 5 === 0 || i >= short.length) {
          expect(await api.Testings.isGrammarAcceptString(theirs, json), `theirs: ${pattern} ${json}`).toBe(
            want,
          );
        }
        expect(await api.Testings.isGrammarAcceptString(ours, `${json}"`), `${pattern} ${json}"`).toBe(false);
      }
      expect(matched, pattern).toBeGreaterThan(0);
      ours.dispose();
      theirs.dispose();
    }
  }, 240_000);

  it("give the same token masks as xgrammar's own conversion at every step of random paths", async () => {
    const { api } = loadXGrammar();
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const stopIds = new Set(tokenizer.stopIds);
    const quoting = new Set(
      target.vocabulary.pieces.flatMap((piece, id) => (piece.includes('"') ? [id] : [])),
    );
    for (const [pattern] of cases) {
      const schema = {
        type: 'object',
        properties: { p: { type: 'string', pattern }, n: { type: 'integer', minimum: 0, maximum: 9 } },
        required: ['p', 'n'],
        additionalProperties: false,
      };
      const spec = structuredSpec('test', { schema }) as { schema: object };
      const source = await api.Grammar.fromJSONSchema(JSON.stringify(spec.schema), false, -1);
      const theirs = source.toString();
      source.dispose();
      const a = await compileGrammar('test', 'grammar', { kind: 'grammar', grammar: theirs }, target);
      const b = await compileGrammar('test', 'schema', spec as never, target);
      const regex = new RegExp(pattern, 'u');
      for (let w = 0; w < 4; w++) {
        await walkInLockstep(a, b, 60, `seed ${seed}, ${pattern}`, (allowed, ids, where) => {
          const going = allowed.filter((id) => id < config.vocabSize && !stopIds.has(id));
          if (going.length === 0) {
            const value = JSON.parse(tokenizer.decode(ids));
            expect(regex.test(value.p), where).toBe(true);
            return null;
          }
          // A third of the time a token that writes a quote, so the string ends and the path goes on past it.
          const closing = going.filter((id) => quoting.has(id));
          const from = closing.length > 0 && rand() < 0.3 ? closing : going;
          return from[Math.floor(rand() * from.length)]!;
        });
      }
    }
  }, 240_000);
});

describe('length sites (sites.ts)', () => {
  const stringTool = (name: string, maxLength: number): ToolDefinition => ({
    type: 'function',
    function: {
      name,
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength },
          code: { type: 'string', pattern: '^[a-z][a-z0-9-]{0,5}$' },
          note: { type: 'string', minLength: 2, maxLength: 4 },
        },
        required: ['city', 'code', 'note'],
        additionalProperties: false,
      },
    },
  });

  it('are kept where one count applies: not beside another string in an anyOf, nor in definitions', async () => {
    const sitesOf = async (schema: JsonSchema) => {
      const spec = structuredSpec('test', { schema }) as never;
      return (await compileGrammar('test', 'schema', spec, target)).sites?.sites.length ?? 0;
    };
    const bounded = { type: 'string', maxLength: 5 };
    expect(await sitesOf(bounded)).toBe(1);
    expect(await sitesOf({ type: ['string', 'null'], maxLength: 5 })).toBe(1);
    expect(await sitesOf({ anyOf: [bounded, { type: 'integer' }] })).toBe(1);
    expect(await sitesOf({ anyOf: [bounded, { type: 'string', maxLength: 9 }] })).toBe(0);
    expect(await sitesOf({ anyOf: [bounded, { enum: ['a', 1] }] })).toBe(0);
    expect(
      await sitesOf({ $defs: { b: bounded }, type: 'object', properties: { x: { $ref: '#/$defs/b' } } }),
    ).toBe(0);
    // One mark per distinct shape: three places, two shapes.
    expect(
      await sitesOf({
        type: 'object',
        properties: {
          a: bounded,
          b: { type: 'array', items: bounded },
          c: { type: 'string', minLength: 1, maxLength: 5 },
        },
      }),
    ).toBe(2);
    // Without marks, every count is in the grammar.
    const spec = structuredSpec('test', { schema: bounded }) as never;
    expect(
      (await compileGrammar('test', 'schema', spec, target, { lengthSites: false })).sites,
    ).toBeUndefined();
  });

  it('give the masks of the grammar with every count written, through tool calls, thinking and free text', async () => {
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const stopIds = new Set(tokenizer.stopIds);
    const [thinkEnd] = tokenizer.encode('</think>');
    const [callOpen] = tokenizer.encode('<tool_call>');
    const quoting = new Set(target.vocabulary.pieces.flatMap((p, id) => (p.includes('"') ? [id] : [])));
    // Pieces of non-ASCII bytes (byte-level letters from U+0100 up): characters split across pieces.
    const wide = new Set(
      target.vocabulary.pieces.flatMap((p, id) =>
        /[\u0100-\uffff]/.test(p) && !p.startsWith('\u0120') ? [id] : [],
      ),
    );
    let sitesSeen = 0;
    let steps = 0;
    for (const [choice, thinking] of [
      ['required', true],
      ['auto', false],
      ['required', false],
    ] as const) {
      const tools = [stringTool('get_city', 3 + Math.floor(rand() * 10)), stringTool('find', 1)];
      const spec = toolCallSpec('test', tools, choice, thinking)!;
      const a = await compileGrammar('test', 'tools', spec, target, { lengthSites: false });
      const b = await compileGrammar('test', 'tools', spec, target);
      expect(a.sites).toBeUndefined();
      sitesSeen += b.sites?.sites.length ?? 0;
      for (let w = 0; w < 4; w++) {
        steps += await walkInLockstep(
          a,
          b,
          80,
          `seed ${seed}, ${choice}, thinking ${thinking}`,
          (allowed, ids, where) => {
            const going = allowed.filter((id) => !stopIds.has(id));
            if (going.length === 0) {
              expect(tokenizer.decode(ids), where).not.toContain('\ufffd');
              return null;
            }
            const r = rand();
            for (const special of [thinkEnd, callOpen])
              if (going.includes(special!) && r < 0.3) return special!;
            const pools = [going.filter((id) => quoting.has(id)), going.filter((id) => wide.has(id)), going];
            const from = pools[Math.floor(rand() * 3)]!;
            return (from.length > 0 ? from : going)[
              Math.floor(rand() * (from.length > 0 ? from : going).length)
            ]!;
          },
        );
      }
    }
    expect(sitesSeen).toBeGreaterThan(0);
    expect(steps).toBeGreaterThan(300);
  }, 240_000);

  it('never let a piece break a character: no surrogates, no cut or overlong sequences (xgrammar takes them)', async () => {
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const schema: JsonSchema = {
      type: 'object',
      properties: { s: { type: 'string', maxLength: 6 }, t: { type: 'string' } },
    };
    const spec = structuredSpec('test', { schema }) as never;
    const compiled = await compileGrammar('test', 'schema', spec, target);
    const byte = (b: number) => compiled.pieces.byteId(b);
    // After the lead byte of a surrogate's range (ED), only pieces starting 80–9F may follow.
    const constraint = await GrammarConstraint.create(compiled, 'schema');
    for (const id of tokenizer.encode('{"s": "')) constraint.accept(id);
    await constraint.ready();
    constraint.accept(byte(0xed));
    await constraint.ready();
    const after = allowedIds(constraint.nextMask(), config.vocabSize);
    expect(after.length).toBeGreaterThan(0);
    for (const id of after) {
      const first = compiled.pieces.bytes(id)![0]!;
      expect(first >= 0x80 && first <= 0x9f, `piece ${id} after ED`).toBe(true);
    }
    expect(after).not.toContain(byte(0xa0));
    constraint.dispose();
    // Random paths that favour single bytes: every text decodes without U+FFFD and validates.
    const singles = new Set(Array.from({ length: 256 }, (_, b) => byte(b)));
    const ajv = new Ajv({ strict: false });
    for (let w = 0; w < 12; w++) {
      const c = await GrammarConstraint.create(compiled, 'schema');
      const ids: number[] = [];
      for (let step = 0; step < 160 && !c.isComplete(); step++) {
        await c.ready();
        const allowed = allowedIds(c.nextMask(), config.vocabSize).filter((id) => !tokenizer.stopIds.has(id));
        if (allowed.length === 0) break;
        const few = allowed.filter((id) => singles.has(id));
        const from = few.length > 0 && rand() < 0.7 ? few : allowed;
        const id = from[Math.floor(rand() * from.length)]!;
        c.accept(id);
        ids.push(id);
      }
      const text = tokenizer.decode(ids);
      // A path cut short may end inside a character; nowhere else may a byte stand alone.
      expect(c.isComplete() ? text : text.replace(/\ufffd+$/, ''), `seed ${seed}`).not.toContain('\ufffd');
      if (c.isComplete()) expect(ajv.validate(schema, JSON.parse(text)), `seed ${seed}: ${text}`).toBe(true);
      c.dispose();
    }
  }, 120_000);
});
