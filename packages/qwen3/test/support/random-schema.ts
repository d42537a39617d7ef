/**
 * Random JSON Schemas for structured-output tests: objects and arrays nested up to three deep, enums, bounded
 * strings, integers with one or two bounds, numbers with two, one or none, `anyOf`, `const`. Every value's text is
 * bounded: strings by `maxLength`/`pattern`/`enum`, arrays by `maxItems`, numbers by the product where the schema
 * leaves them open (structured/schema.ts: integers within ±(2^53−1), other numbers at most 38 characters). So a
 * constrained generation of noise always finishes: usually in tens of tokens, rarely in several hundred, and in the
 * worst case (objects of four keys, three levels deep, every value a long number) in a few thousand. Enum strings
 * carry quotes, backslashes, tabs and non-ASCII to exercise escaping.
 */

/** A seeded generator of floats in [0, 1) (mulberry32). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORD_CHARS = 'abcdefghijklmnopqrstuvwxyz_ -.()|"\\é中\t';

type Schema = Record<string, unknown>;

/** A random schema; at `depth` 0 always an object, as a response format or a tool's parameters are. */
export function randomSchema(rand: () => number, depth = 0): Schema {
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const word = (min = 1) =>
    Array.from({ length: int(min, 6) }, () => WORD_CHARS[Math.floor(rand() * WORD_CHARS.length)]).join('');
  const scalars = ['string', 'pattern', 'enum', 'integer', 'number', 'boolean', 'null', 'const', 'anyOf'];
  const kinds = depth >= 3 ? scalars : [...scalars, 'object', 'object', 'object', 'array', 'array'];
  switch (depth === 0 ? 'object' : pick(kinds)) {
    case 'string': {
      const max = int(0, 6);
      return {
        type: 'string',
        maxLength: max,
        ...(max > 0 && rand() < 0.5 ? { minLength: int(1, max) } : {}),
      };
    }
    case 'pattern':
      return { type: 'string', pattern: `^[a-z]{1,${int(1, 5)}}[0-9]?$` };
    case 'enum': {
      // Words that are prefixes of one another, in any order: the case the grammar engine needs rewritten.
      const stem = word();
      const words = Array.from({ length: int(1, 4) }, () =>
        rand() < 0.5 ? stem.slice(0, int(1, stem.length)) : word(),
      );
      const numbers = rand() < 0.3 ? [null, int(-5, 5), int(-500, 500), true] : [];
      return { enum: [...new Set([...words, ...numbers])] };
    }
    case 'integer': {
      const lo = int(-1000, 1000);
      const hi = lo + int(2, 5000);
      // Both sides, one side, exclusive: the forms the grammar engine needs rewritten (structured/schema.ts).
      return pick([
        { type: 'integer', minimum: lo, maximum: hi },
        { type: 'integer', minimum: lo },
        { type: 'integer', maximum: hi },
        { type: 'integer', exclusiveMinimum: lo, exclusiveMaximum: hi },
      ]);
    }
    case 'number': {
      const lo = int(-2000, 2000) / 100;
      return pick([
        // At least 1.5 wide, so an integer lies inside (bounded numbers yield integers: structured/schema.ts).
        { type: 'number', minimum: lo, maximum: lo + int(150, 10000) / 100 },
        { type: 'number', exclusiveMinimum: lo },
        { type: 'number' },
      ]);
    }
    case 'boolean':
      return { type: 'boolean' };
    case 'null':
      return { type: 'null' };
    case 'const':
      return { const: pick([int(-9, 9), word(), true, null]) };
    case 'anyOf':
      return { anyOf: [randomSchema(rand, 3), randomSchema(rand, 3)] };
    case 'array':
      return {
        type: 'array',
        items: randomSchema(rand, depth + 1),
        minItems: int(0, 1),
        maxItems: int(1, 3),
      };
    default: {
      const names = [...new Set(Array.from({ length: int(1, 4) }, () => word().replace(/[^a-z_]/g, 'x')))];
      const properties = Object.fromEntries(names.map((n) => [n, randomSchema(rand, depth + 1)]));
      const required = names.filter(() => rand() < 0.7);
      return { type: 'object', properties, required, additionalProperties: false };
    }
  }
}
