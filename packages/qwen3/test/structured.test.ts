/**
 * Structured output through xgrammar: random JSON Schemas × seeds walked to completion (uniformly random paths,
 * and the tiny model's noise through its masked logits), EBNF grammars, our EBNF for integer ranges, finite numbers
 * and literals, the compile cache, errors, mask costs. Every output is decoded with the real tokenizer, parsed, and
 * validated with ajv. Random inputs come from a seed that failure messages name.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { QkValueError } from '@qk/ops';
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { randomWeights } from '../src/checkpoint/random.js';
import { PRESETS } from '../src/config.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { pickToken } from '../src/engine/sampling.js';
import type { GrammarConstraint } from '../src/structured/constraint.js';
import { finiteNumberEbnf, fragmentGrammar, integerRangeEbnf, literalsEbnf } from '../src/structured/ebnf.js';
import { compileGrammar, type GrammarTarget } from '../src/structured/grammar.js';
import { createConstraint, grammarTarget, structuredSpec } from '../src/structured/index.js';
import { BUNDLED_XGRAMMAR, loadXGrammar, locateXGrammar } from '../src/structured/xgrammar.js';
import { loadTokenizer } from '../src/tokenizer/index.js';
import type { Engine, Qwen3Tokenizer } from '../src/types.js';
import { allowedIds, walk } from './support/constrained-sampler.js';
import { randomSchema, seededRandom } from './support/random-schema.js';

const config = PRESETS.tiny;
const ajv = new Ajv({ strict: false });
let tokenizer: Qwen3Tokenizer;
let target: GrammarTarget;
let stopIds: Set<number>;

beforeAll(async () => {
  tokenizer = await loadTokenizer({ eosTokenIds: config.eosTokenIds });
  stopIds = new Set([...tokenizer.stopIds]);
  target = grammarTarget('test', tokenizer, config.vocabSize, stopIds);
});

/** A chooser that picks uniformly among the allowed ids, from `seed`. */
function uniform(seed: number) {
  const rand = seededRandom(seed);
  return (allowed: readonly number[]) => allowed[Math.floor(rand() * allowed.length)]!;
}

function expectValid(schema: object, text: string): void {
  let value: unknown;
  expect(
    () => {
      value = JSON.parse(text);
    },
    `${JSON.stringify(schema)} → ${text}`,
  ).not.toThrow();
  const validate = ajv.compile(schema);
  expect(validate(value), `${JSON.stringify(schema)} → ${text}: ${ajv.errorsText(validate.errors)}`).toBe(
    true,
  );
}

describe('JSON Schema constraints on random paths', () => {
  const schemas = 40;
  const seeds = 3;
  it(`${schemas} random schemas × ${seeds} seeds: every output parses and validates`, async () => {
    const base = Math.floor(Math.random() * 1e9);
    let walks = 0;
    const computeMs: number[] = [];
    for (let s = 0; s < schemas; s++) {
      const schema = randomSchema(seededRandom(base + s));
      for (let seed = 0; seed < seeds; seed++) {
        const constraint = await createConstraint(
          'test',
          'schema',
          structuredSpec('test', { schema })!,
          target,
        );
        const result = await walk(constraint, {
          vocabSize: config.vocabSize,
          stopIds,
          maxSteps: 600,
          choose: uniform(base * 7 + s * 31 + seed),
          awaitReady: true,
        });
        computeMs.push(...result.readyMs);
        expect(result.end, `schema seed ${base + s}: ${JSON.stringify(schema)}`).not.toBe('steps');
        // The padding rows of the embedding (past the tokenizer's ids) are never allowed.
        expect(result.largestAllowed).toBeLessThan(tokenizer.vocabSize);
        expectValid(schema, tokenizer.decode(result.ids));
        constraint.dispose();
        walks++;
      }
    }
    expect(walks).toBe(schemas * seeds);
    computeMs.sort((a, b) => a - b);
    const at = (q: number) => computeMs[Math.floor(computeMs.length * q)]!.toFixed(3);
    console.info(
      `mask computation over ${config.vocabSize} ids: median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(0.999)} ms (${computeMs.length} steps)`,
    );
  }, 240_000);

  it('integers and numbers without bounds: every walk ends, short, with a finite value that validates', async () => {
    const seed = Math.floor(Math.random() * 1e9);
    // Uniform choices, and noise that never stops while it may go on: the grammar alone must end the number.
    const endless = (s: number) => {
      const pick = uniform(s);
      return (allowed: readonly number[]) => {
        const going = allowed.filter((id) => !stopIds.has(id));
        return pick(going.length > 0 ? going : allowed);
      };
    };
    const cases: { schema: object; longest: number }[] = [
      // An optional minus, 16 integer digits, "." and 16 digits, "e", a sign and 2 digits.
      { schema: { type: 'number' }, longest: 38 },
      // An optional minus and 16 digits (2^53 − 1 has 16).
      { schema: { type: 'integer' }, longest: 17 },
      { schema: { type: ['number', 'null'] }, longest: 38 },
      { schema: { type: ['integer', 'null'] }, longest: 17 },
      {
        schema: { type: 'array', items: { type: 'number' }, minItems: 1, maxItems: 2 },
        longest: 2 + 38 * 2 + 2,
      },
    ];
    const finite = (v: unknown): boolean =>
      Array.isArray(v) ? v.every(finite) : v === null || Number.isFinite(v as number);
    let ended = 0;
    for (const [c, { schema, longest }] of cases.entries()) {
      const spec = structuredSpec('test', { schema: schema as Record<string, unknown> })!;
      const validate = ajv.compile(schema);
      for (let w = 0; w < 12; w++) {
        const walkSeed = seed + c * 1000 + w;
        const constraint = await createConstraint('test', 'schema', spec, target);
        const result = await walk(constraint, {
          vocabSize: config.vocabSize,
          stopIds,
          maxSteps: 200,
          choose: w % 2 === 0 ? uniform(walkSeed) : endless(walkSeed),
        });
        constraint.dispose();
        const text = tokenizer.decode(result.ids);
        const where = `seed ${seed} (walk ${walkSeed}): ${JSON.stringify(schema)} → ${text}`;
        expect(result.end, where).not.toBe('steps');
        expect(text.length, where).toBeLessThanOrEqual(longest);
        let value: unknown;
        expect(() => {
          value = JSON.parse(text);
        }, where).not.toThrow();
        expect(finite(value), where).toBe(true);
        expect(validate(value), `${where}: ${ajv.errorsText(validate.errors)}`).toBe(true);
        if ((schema as { type?: unknown }).type === 'integer') {
          expect(Number.isSafeInteger(value), where).toBe(true);
        }
        ended++;
      }
    }
    expect(ended).toBe(cases.length * 12);
  }, 120_000);

  it('is complete right after the token that leaves only a stop token, not before', async () => {
    const word = `w${Math.floor(Math.random() * 1000)}`;
    const constraint = await createConstraint(
      'test',
      'schema',
      structuredSpec('test', { schema: { enum: [word] } })!,
      target,
    );
    const forbidden = tokenizer.encode('x')[0]!;
    expect(() => constraint.accept(forbidden)).toThrow(QkValueError);
    for (const id of tokenizer.encode(JSON.stringify(word))) {
      expect(constraint.isComplete()).toBe(false);
      constraint.accept(id);
    }
    expect(constraint.isComplete()).toBe(true);
    // A number that may end or go on: not complete after "5", complete after "57" (at most two digits).
    const digits = [1 + Math.floor(Math.random() * 9), Math.floor(Math.random() * 10)];
    const number = await createConstraint(
      'test',
      'schema',
      structuredSpec('test', { schema: { type: 'integer', minimum: 0, maximum: 99 } })!,
      target,
    );
    number.accept(tokenizer.encode(String(digits[0]))[0]!);
    expect(number.isComplete()).toBe(false);
    expect(allowedIds(number.nextMask(), config.vocabSize).some((id) => stopIds.has(id))).toBe(true);
    number.accept(tokenizer.encode(String(digits[1]))[0]!);
    expect(number.isComplete()).toBe(true);
  });

  it('masks read at once (no turn of the event loop) equal the prefetched ones', async () => {
    const schema = randomSchema(seededRandom(Math.floor(Math.random() * 1e9)));
    const spec = structuredSpec('test', { schema })!;
    const eager = await createConstraint('test', 'schema', spec, target);
    const prefetched = await createConstraint('test', 'schema', spec, target);
    const choose = uniform(Math.floor(Math.random() * 1e9));
    for (let step = 0; step < 300 && !eager.isComplete(); step++) {
      await prefetched.ready();
      const mask = eager.nextMask();
      expect(prefetched.nextMask()).toEqual(mask);
      const token = choose(allowedIds(mask, config.vocabSize));
      eager.accept(token);
      prefetched.accept(token);
      if (stopIds.has(token)) break;
    }
    expect(eager.served.synchronous).toBeGreaterThan(0);
    expect(prefetched.isComplete()).toBe(eager.isComplete());
  });
});

describe('EBNF grammars', () => {
  it('random alternatives and repetitions: every output matches the equivalent regular expression', async () => {
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    for (let g = 0; g < 10; g++) {
      const words = [
        ...new Set(Array.from({ length: 1 + Math.floor(rand() * 4) }, () => `w${Math.floor(rand() * 500)}`)),
      ];
      const digits = 1 + Math.floor(rand() * 4);
      const grammar = `root ::= (${words.map((w) => `"${w}"`).join(' | ')}) " " [0-9]{1,${digits}} ("," [a-c])*\n`;
      const regex = new RegExp(`^(${words.join('|')}) [0-9]{1,${digits}}(,[a-c])*$`);
      const constraint = await createConstraint('test', 'grammar', { kind: 'grammar', grammar }, target);
      const result = await walk(constraint, {
        vocabSize: config.vocabSize,
        stopIds,
        maxSteps: 200,
        // Prefer stopping once allowed, so the `*` repetition ends.
        choose: (allowed, step) =>
          allowed.find((id) => stopIds.has(id) && step > 4) ?? uniform(g * 13 + step)(allowed),
      });
      expect(result.end).not.toBe('steps');
      expect(tokenizer.decode(result.ids)).toMatch(regex);
    }
  }, 60_000);

  it('a grammar with a syntax error is a QkValueError with the parser reason, and the next compile works', async () => {
    const bad = { kind: 'grammar' as const, grammar: 'root ::= ("a" | ' };
    await expect(compileGrammar('generate', 'grammar', bad, target)).rejects.toThrow(
      /grammar.*EBNF parser error/s,
    );
    const schema = { type: 'integer', minimum: 0, maximum: 9 };
    const constraint = await createConstraint('test', 'schema', structuredSpec('test', { schema })!, target);
    const result = await walk(constraint, {
      vocabSize: config.vocabSize,
      stopIds,
      maxSteps: 10,
      choose: uniform(1),
    });
    expectValid(schema, tokenizer.decode(result.ids));
  });
});

describe('our EBNF for integer ranges, finite numbers and literals', () => {
  it('the EBNF accepts exactly the JSON integers in range, around both bounds, across zero and far past them, in the string acceptor and in the token matcher', async () => {
    const xgrammar = loadXGrammar();
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const safe = Number.MAX_SAFE_INTEGER;
    const digitRun = (n: number) =>
      Array.from({ length: n }, () => '123456789'[Math.floor(rand() * 9)]).join('');
    const ranges: [number, number][] = [
      // One-sided schema bounds become [lo, ±(2^53−1)]; this one let a 67-digit integer through the old EBNF.
      [369, safe],
      [-safe, safe],
      [-safe, -17],
      [0, 150],
    ];
    for (let t = 0; t < 16; t++) {
      const scale = [10, 1000, 100_000, 1e12][t % 4]!;
      const lo = Math.floor((rand() - 0.5) * scale);
      ranges.push([lo, lo + Math.floor(rand() * scale)]);
    }
    for (const [lo, hi] of ranges) {
      const ebnf = fragmentGrammar(integerRangeEbnf(lo, hi, 'range'));
      const grammar = await xgrammar.api.Grammar.fromEBNF(ebnf);
      const compiled = await compileGrammar('test', 'grammar', { kind: 'grammar', grammar: ebnf }, target);
      const stop = [...stopIds][0]!;
      const candidates = new Set<string>(['-0', '00', `0${Math.abs(hi)}`, '', '+1']);
      for (let d = -40; d <= 40; d++) candidates.add(String(lo + d)).add(String(hi + d));
      for (let i = 0; i < 40; i++) candidates.add(String(Math.floor(lo + rand() * (hi - lo))));
      // Digit strings longer than any bound, and bounds with digits appended.
      for (const n of [17, 18, 25, 40]) candidates.add(digitRun(n)).add(`-${digitRun(n)}`);
      candidates
        .add(`${hi}0`)
        .add(`${lo}9`)
        .add(`${hi}${digitRun(20)}`);
      for (const text of candidates) {
        const want =
          /^-?(0|[1-9][0-9]*)$/.test(text) && text !== '-0' && Number(text) >= lo && Number(text) <= hi;
        const where = `[${lo}, ${hi}] ${text} (seed ${seed})`;
        expect(await xgrammar.api.Testings.isGrammarAcceptString(grammar, text), where).toBe(want);
        // The token matcher (what a generation runs), one token at a time, then the stop token.
        const matcher = await compiled.instance.api.GrammarMatcher.createGrammarMatcher(compiled.grammar, [
          ...compiled.stopIds,
        ]);
        try {
          const accepted =
            tokenizer.encode(text).every((id) => matcher.acceptToken(id)) && matcher.acceptToken(stop);
          expect(accepted, `matcher: ${where}`).toBe(want);
        } finally {
          matcher.dispose();
        }
      }
      grammar.dispose();
    }
    expect(() => integerRangeEbnf(2, 1, 'range')).toThrow(RangeError);
  }, 120_000);

  it('the finite-number EBNF accepts exactly the length-bounded JSON numbers, and each parses finite', async () => {
    const xgrammar = loadXGrammar();
    const seed = Math.floor(Math.random() * 1e9);
    const rand = seededRandom(seed);
    const grammar = await xgrammar.api.Grammar.fromEBNF(`root ::= ${finiteNumberEbnf()}`);
    // JSON's number grammar (RFC 8259), and the same with each part's length bounded, as ebnf.ts documents it.
    const json = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
    const bounded = /^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?$/;
    const digits = (n: number, first = '0123456789') =>
      Array.from(
        { length: n },
        (_, i) => (i === 0 ? first : '0123456789')[Math.floor(rand() * (i === 0 ? first.length : 10))],
      ).join('');
    const refused = [
      '01',
      '-01',
      '00',
      '1.',
      '.5',
      '-.5',
      '1e',
      '1e+',
      '1E-',
      '+1',
      '-',
      '',
      '1e400',
      '1e-308',
    ];
    refused.push(`1${digits(16)}`, `-9${digits(16)}`, `1.${digits(17)}`, `0.5e${digits(3, '123456789')}`);
    refused.push('Infinity', 'NaN', '0x1', '1_0', '1 ', ' 1', '--1', '1.2.3', '1e2e3');
    const accepted = [
      '0',
      '-0',
      '-0.5',
      '0.0',
      '1E+05',
      '0e0',
      '-0e-0',
      `9${'9'.repeat(15)}.${'9'.repeat(16)}e99`,
    ];
    accepted.push(`-${digits(16, '123456789')}.${digits(16)}E-${digits(2)}`, String(Number.MAX_SAFE_INTEGER));
    const candidates = new Set<string>([...refused, ...accepted]);
    // Brute force: every text of up to 4 characters over the characters of JSON numbers.
    const alphabet = ['0', '7', '-', '+', '.', 'e', 'E'];
    let layer = [''];
    for (let n = 0; n <= 4; n++) {
      for (const text of layer) candidates.add(text);
      layer = layer.flatMap((text) => alphabet.map((c) => text + c));
    }
    // Random numbers near the limits of each part, some with one character changed.
    for (let i = 0; i < 400; i++) {
      const int =
        rand() < 0.1
          ? `0${digits(1 + Math.floor(rand() * 3))}`
          : rand() < 0.2
            ? '0'
            : digits(1 + Math.floor(rand() * 18), '123456789');
      const fraction = rand() < 0.4 ? '' : `.${digits(Math.floor(rand() * 19))}`;
      const exponent =
        rand() < 0.4
          ? ''
          : `${rand() < 0.5 ? 'e' : 'E'}${['', '+', '-'][Math.floor(rand() * 3)]}${digits(Math.floor(rand() * 4))}`;
      let text = `${rand() < 0.3 ? '-' : ''}${int}${fraction}${exponent}`;
      if (rand() < 0.2) {
        const at = Math.floor(rand() * (text.length + 1));
        text = text.slice(0, at) + alphabet[Math.floor(rand() * alphabet.length)] + text.slice(at + 1);
      }
      candidates.add(text);
    }
    for (const text of candidates) {
      const where = `seed ${seed}: ${JSON.stringify(text)}`;
      const accepts = await xgrammar.api.Testings.isGrammarAcceptString(grammar, text);
      expect(accepts, where).toBe(bounded.test(text));
      if (accepts) {
        expect(json.test(text), where).toBe(true);
        expect(Number.isFinite(JSON.parse(text)), where).toBe(true);
      }
    }
    for (const text of refused) expect(bounded.test(text), `seed ${seed}: ${text}`).toBe(false);
    for (const text of accepted) expect(bounded.test(text), `seed ${seed}: ${text}`).toBe(true);
    grammar.dispose();
  }, 120_000);

  it('the literal trie accepts exactly its texts: not their prefixes, not their extensions', async () => {
    const xgrammar = loadXGrammar();
    const rand = seededRandom(Math.floor(Math.random() * 1e9));
    const chars = 'ab"\\中 é';
    const word = () =>
      Array.from({ length: 1 + Math.floor(rand() * 4) }, () => chars[Math.floor(rand() * chars.length)]).join(
        '',
      );
    for (let t = 0; t < 12; t++) {
      const stem = word();
      const texts = Array.from({ length: 2 + Math.floor(rand() * 4) }, () =>
        JSON.stringify(
          rand() < 0.6
            ? stem.slice(0, 1 + Math.floor(rand() * stem.length)) + (rand() < 0.5 ? word() : '')
            : word(),
        ),
      );
      const grammar = await xgrammar.api.Grammar.fromEBNF(`root ::= ${literalsEbnf(texts)}`);
      const candidates = new Set<string>(texts);
      for (const text of texts) {
        for (let cut = 0; cut < text.length; cut++) candidates.add(text.slice(0, cut));
        candidates.add(`${text}${texts[0]}`).add(`${text}a`);
      }
      for (const text of candidates) {
        expect(
          await xgrammar.api.Testings.isGrammarAcceptString(grammar, text),
          `${texts.join(' ')}: ${text}`,
        ).toBe(texts.includes(text));
      }
      grammar.dispose();
    }
  }, 120_000);
});

describe('loading xgrammar', () => {
  it('finds the script beside a bundled main script when no package resolves, and runs it from there', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'qk-xgrammar-'));
    try {
      mkdirSync(path.join(dir, 'xgrammar'));
      copyFileSync(locateXGrammar(), path.join(dir, BUNDLED_XGRAMMAR));
      const main = path.join(dir, 'qk.mjs');
      const found = locateXGrammar(null, main);
      expect(found).toBe(path.join(dir, BUNDLED_XGRAMMAR));
      const word = `w${Math.floor(Math.random() * 1e6)}`;
      const ebnf = await loadXGrammar(found).api.Testings._jsonSchemaToEBNF(
        JSON.stringify({ const: word }),
        false,
        -1,
      );
      expect(ebnf).toContain(word);
      expect(() => locateXGrammar(null, path.join(dir, 'sub', 'qk.mjs'))).toThrow(/not found/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('schema checks and the compile cache', () => {
  it('refuses non-schemas before compiling, and names unsupported keywords from the compiler', async () => {
    expect(() => structuredSpec('generate', { schema: 'object' as never })).toThrow(/JSON Schema/);
    expect(() => structuredSpec('generate', { schema: { type: 'objekt' } })).toThrow(
      /not a valid JSON Schema/,
    );
    for (const $schema of [
      'https://json-schema.org/draft/2020-12/schema',
      'http://json-schema.org/draft-07/schema#',
    ]) {
      expect(structuredSpec('generate', { schema: { $schema, type: 'boolean' } })).toEqual({
        kind: 'schema',
        schema: { type: 'boolean' },
      });
    }
    for (const keyword of ['uniqueItems', 'format', 'oneOf', 'multipleOf']) {
      const value =
        keyword === 'oneOf'
          ? [{ type: 'string' }]
          : keyword === 'format'
            ? 'date'
            : keyword === 'multipleOf'
              ? 3
              : true;
      const schema = { type: 'object', properties: { a: { type: 'array', [keyword]: value } } };
      expect(() => structuredSpec('generate', { schema }), keyword).toThrow(
        new RegExp(`"${keyword}" at #\\.properties\\.a`),
      );
    }
    expect(() =>
      structuredSpec('generate', { schema: { type: 'number', minimum: 0.2, maximum: 0.7 } }),
    ).toThrow(/no integer/);
    for (const pattern of ['^.{1,3}$', '^[a-z"]+$', '^a\\\\b$', '^[^a]$', '^\\s$', '^\\x09$']) {
      expect(() => structuredSpec('generate', { schema: { type: 'string', pattern } }), pattern).toThrow(
        /must escape/,
      );
    }
    for (const pattern of ['^[a-z]{1,3}\\d?$', '^(?:ab|c[0-9])+$', '^[^"\\\\\\u0000-\\u001f]*$']) {
      expect(
        () => structuredSpec('generate', { schema: { type: 'string', pattern } }),
        pattern,
      ).not.toThrow();
    }
    expect(() => structuredSpec('generate', { schema: { enum: [{ a: 1 }, 'c'] } })).toThrow(
      /object or array/,
    );
    expect(() => structuredSpec('generate', { schema: { enum: [] } })).toThrow(QkValueError);
    expect(() => structuredSpec('generate', { schema: {}, grammar: 'root ::= "a"' })).toThrow(/together/);
    expect(() => structuredSpec('generate', { grammar: '  ' })).toThrow(QkValueError);
  });

  it('bounds every integer and splits type arrays by type, keeping the rest as it was', () => {
    const safe = { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };
    const rewritten = (schema: object) =>
      (structuredSpec('generate', { schema: schema as Record<string, unknown> }) as { schema: unknown })
        .schema;
    const lo = Math.floor(Math.random() * 100);
    expect(rewritten({ type: 'integer' })).toEqual({ type: 'integer', ...safe });
    expect(rewritten({ type: 'integer', minimum: lo })).toEqual({
      type: 'integer',
      minimum: lo,
      maximum: Number.MAX_SAFE_INTEGER,
    });
    // A number without bounds stays: grammar.ts writes it (the finite-number EBNF).
    expect(rewritten({ type: 'number' })).toEqual({ type: 'number' });
    expect(rewritten({ type: ['number', 'null'], minimum: lo + 0.5, maxLength: 3 })).toEqual({
      anyOf: [{ type: 'integer', minimum: lo + 1, maximum: Number.MAX_SAFE_INTEGER }, { type: 'null' }],
    });
    expect(rewritten({ type: ['integer', 'number'] })).toEqual({ type: 'number' });
    expect(rewritten({ type: ['integer'] })).toEqual({ type: 'integer', ...safe });
    expect(
      rewritten({
        type: ['object', 'string', 'integer'],
        properties: { n: { $ref: '#/$defs/n' } },
        required: ['n'],
        maxLength: 2,
        $defs: { n: { type: 'integer' } },
      }),
    ).toEqual({
      anyOf: [
        { type: 'object', properties: { n: { $ref: '#/$defs/n' } }, required: ['n'] },
        { type: 'string', pattern: '^[^"\\\\\\u0000-\\u001f]{0,2}$' },
        { type: 'integer', ...safe },
      ],
      $defs: { n: { type: 'integer', ...safe } },
    });
    // With enum, const, anyOf or $ref beside them, the grammar engine follows those: left as they were.
    for (const schema of [
      { type: 'integer', enum: [1, 2] },
      { type: 'integer', anyOf: [{ const: 1 }, { const: 2 }] },
      { type: ['number', 'null'], anyOf: [{ const: 1 }, { type: 'null' }] },
      { type: ['number', 'null'], const: 3 },
    ]) {
      expect(rewritten(schema)).toEqual(schema);
    }
  });

  it('compiles a schema once per tokenizer: the second request reuses it', async () => {
    const schema = { type: 'object', properties: { [`k${Math.random()}`]: { type: 'boolean' } } };
    const t0 = performance.now();
    const first = await compileGrammar('test', 'schema', structuredSpec('test', { schema })!, target);
    const firstMs = performance.now() - t0;
    const t1 = performance.now();
    const second = await compileGrammar('test', 'schema', structuredSpec('test', { schema })!, target);
    const secondMs = performance.now() - t1;
    expect(second).toBe(first);
    expect(secondMs).toBeLessThan(firstMs);
  });
});

describe('the tiny model through its masked logits', () => {
  let engine: Engine;
  beforeAll(async () => {
    const weights = await randomWeights(config, { dtype: 'f32', seed: 3 });
    engine = createCpuEngine(config, weights, { maxContext: 512, vocabLimit: tokenizer.vocabSize });
  });

  /** Masked sampling from the engine's logits: disallowed ids get −∞, then the usual sampler draws. */
  function modelChooser(prompt: readonly number[], seed: number) {
    return (allowed: readonly number[], step: number, ids: readonly number[]) => {
      const context = step === 0 ? prompt : [ids[ids.length - 1]!];
      const start = step === 0 ? 0 : prompt.length + ids.length - 1;
      const logits = engine.logits(context, start);
      const masked = new Float32Array(logits.length).fill(-Infinity);
      for (const id of allowed) masked[id] = logits[id]!;
      return pickToken(masked, { temperature: 1, topK: 0, topP: 1, seed }, step);
    };
  }

  it('unconstrained, the tiny model writes noise that is not JSON', () => {
    const prompt = tokenizer.encode('Reply with JSON: ');
    const ids: number[] = [];
    let logits = engine.logits(prompt, 0);
    for (let i = 0; i < 24; i++) {
      const id = pickToken(logits, { temperature: 1, topK: 0, topP: 1, seed: 5 }, i);
      ids.push(id);
      logits = engine.logits([id], prompt.length + i);
    }
    expect(() => JSON.parse(tokenizer.decode(ids))).toThrow();
  });

  it('6 random schemas × 2 seeds: every output parses and validates; the mask costs under a millisecond a step', async () => {
    const base = Math.floor(Math.random() * 1e9);
    const prompt = tokenizer.encode('Reply with JSON: ');
    const maskMs: number[] = [];
    let prefetched = 0;
    let steps = 0;
    for (let s = 0; s < 6; s++) {
      const schema = randomSchema(seededRandom(base + s));
      for (let seed = 0; seed < 2; seed++) {
        const constraint = await createConstraint(
          'test',
          'schema',
          structuredSpec('test', { schema })!,
          target,
        );
        const result = await walk(constraint, {
          vocabSize: config.vocabSize,
          stopIds,
          maxSteps: 400,
          choose: modelChooser(prompt, base + seed),
        });
        expect(result.end, `schema seed ${base + s}`).not.toBe('steps');
        expectValid(schema, tokenizer.decode(result.ids));
        maskMs.push(...result.maskMs);
        prefetched += (constraint as GrammarConstraint).served.prefetched;
        steps += result.maskMs.length;
      }
    }
    maskMs.sort((a, b) => a - b);
    const median = maskMs[Math.floor(maskMs.length / 2)]!;
    console.info(
      `constrained steps: ${steps}, masks prefetched: ${prefetched}, nextMask median ${median.toFixed(3)} ms, p90 ${maskMs[Math.floor(maskMs.length * 0.9)]!.toFixed(3)} ms`,
    );
    // With a step between masks (the event loop turns), every mask after the first arrives by prefetch.
    expect(prefetched).toBeGreaterThan(steps / 2);
    expect(median).toBeLessThan(1);
  }, 300_000);
});
