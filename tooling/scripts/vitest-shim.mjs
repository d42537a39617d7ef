// A small stand-in for the parts of vitest that the GPU test files use (describe/it/skipIf/each, afterAll,
// onTestFinished, expect with toBe, toBeInstanceOf, toEqual, toMatchObject, toMatch, toContain, toHaveLength, toBeCloseTo,
// toBeLessThan(OrEqual), toBeGreaterThan(OrEqual), toThrow with a class, a RegExp or a message part, `.rejects` / `.resolves` before any of them,
// expect.arrayContaining), so gpu-test-bundle.mjs can
// turn such a file into one script that runs under a bare `node` on a GPU host with no npm (DESIGN.md §5). It is
// not vitest: it only needs to run our own tests faithfully, and it fails a run in which nothing passed.
import { isDeepStrictEqual } from 'node:util';

const tests = [];
const afterAllHooks = [];
let finishHooks = [];
let prefix = '';
/** Runs once every test has run (in registration order), like vitest's file-level afterAll. */
export function afterAll(fn) {
  afterAllHooks.push(fn);
}
/** Runs after the current test, passed or failed. */
export function onTestFinished(fn) {
  finishHooks.push(fn);
}
export function describe(name, fn) {
  const p = prefix;
  prefix = `${p}${name} > `;
  fn();
  prefix = p;
}
describe.skipIf = (cond) => (name, fn) =>
  cond ? tests.push({ name: prefix + name, skip: true }) : describe(name, fn);
export function it(name, fn) {
  tests.push({ name: prefix + name, fn });
}
/** A test name from a row of `.each`: `$key` takes the row's field, `%s`/`%d`/`%i`/`%j` the row's next element. */
function eachName(name, row) {
  let k = 0;
  const items = Array.isArray(row) ? row : [row];
  return name
    .replace(/\$([A-Za-z_][\w]*)/g, (m, key) =>
      row && typeof row === 'object' && key in row ? String(row[key]) : m,
    )
    .replace(/%[sdij]/g, (m) => (m === '%j' ? JSON.stringify(items[k++]) : String(items[k++])));
}
/** `.each(table)(name, fn)`: one test per row; an array row is spread into fn's arguments, another passed whole. */
const eachOf = (register) => (table) => (name, fn) => {
  for (const row of table) register(eachName(name, row), () => (Array.isArray(row) ? fn(...row) : fn(row)));
};
it.each = eachOf((name, fn) => it(name, fn));
it.skipIf = (cond) => {
  const register = (name, fn) => (cond ? tests.push({ name: prefix + name, skip: true }) : it(name, fn));
  register.each = eachOf(register);
  return register;
};
it.runIf = (cond) => it.skipIf(!cond);
export const test = it;
class Arr {
  constructor(items) {
    this.items = items;
  }
}
function eq(a, b) {
  if (b instanceof Arr)
    return Array.isArray(a) && b.items.every((x) => a.some((y) => isDeepStrictEqual(x, y)));
  if (b && typeof b === 'object' && !Array.isArray(b)) return Object.keys(b).every((k) => eq(a?.[k], b[k]));
  return isDeepStrictEqual(a, b);
}
function throwMatches(e, want, fail) {
  const message = String(e?.message ?? e);
  if (typeof want === 'function' && !(e instanceof want))
    fail(`to throw ${want.name}, threw ${e?.constructor?.name}: ${message}`);
  if (want instanceof RegExp && !want.test(message)) fail(`to throw ${want}, threw: ${message}`);
  if (typeof want === 'string' && !message.includes(want)) fail(`to throw "${want}", threw: ${message}`);
}
export function expect(v, msg = '') {
  const fail = (what) => {
    throw new Error(`${msg ? `${msg}: ` : ''}expected ${JSON.stringify(v)?.slice(0, 200)} ${what}`);
  };
  const settled = (rejected) =>
    new Proxy(
      {},
      {
        // expect(p).rejects.X(...) / .resolves.X(...): await p, then X on its error (toThrow: the error itself) or
        // its value; a promise that settles the other way fails.
        get:
          (_, name) =>
          async (...args) => {
            let value;
            try {
              value = await v;
            } catch (e) {
              if (!rejected) fail(`to resolve, rejected with ${e?.message ?? e}`);
              if (name === 'toThrow') return throwMatches(e, args[0], fail);
              return expect(e, msg)[name](...args);
            }
            if (rejected) fail('to reject');
            return expect(value, msg)[name](...args);
          },
      },
    );
  return {
    rejects: settled(true),
    resolves: settled(false),
    toMatchObject: (x) => {
      if (!eq(v, x)) fail('to match the object');
    },
    toBeInstanceOf: (cls) => {
      if (!(v instanceof cls)) fail(`to be an instance of ${cls?.name}`);
    },
    toHaveLength: (n) => {
      if (v?.length !== n) fail(`to have length ${n}`);
    },
    toBeCloseTo: (x, digits = 2) => {
      if (!(Math.abs(v - x) < 10 ** -digits / 2)) fail(`to be close to ${x} (${digits} digits)`);
    },
    toBe: (x) => {
      if (!Object.is(v, x)) fail(`to be ${x}`);
    },
    toEqual: (x) => {
      if (!eq(v, x)) fail('to equal');
    },
    toMatch: (re) => {
      if (!(typeof re === 'string' ? String(v).includes(re) : re.test(String(v)))) fail(`to match ${re}`);
    },
    toContain: (x) => {
      if (!(typeof v === 'string' ? v.includes(x) : Array.from(v ?? []).includes(x))) fail(`to contain ${x}`);
    },
    toBeLessThan: (x) => {
      if (!(v < x)) fail(`< ${x}`);
    },
    toBeLessThanOrEqual: (x) => {
      if (!(v <= x)) fail(`<= ${x}`);
    },
    toBeGreaterThan: (x) => {
      if (!(v > x)) fail(`> ${x}`);
    },
    toBeGreaterThanOrEqual: (x) => {
      if (!(v >= x)) fail(`>= ${x}`);
    },
    toThrow: (want) => {
      try {
        v();
      } catch (e) {
        throwMatches(e, want, fail);
        return;
      }
      fail('to throw');
    },
  };
}
expect.arrayContaining = (items) => new Arr(items);
export async function run() {
  let passed = 0,
    failed = 0,
    skipped = 0;
  // A promise a test dropped must fail the run, not end it (node's default) before the other files ran.
  process.on('unhandledRejection', (e) => {
    failed++;
    console.log(`FAIL (a rejection no test awaited)\n  ${e?.stack ?? e}`);
  });
  for (const t of tests) {
    if (t.skip) {
      skipped++;
      console.log(`SKIP ${t.name}`);
      continue;
    }
    try {
      await t.fn();
      passed++;
      console.log(`PASS ${t.name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name}\n  ${e?.stack ?? e}`);
    } finally {
      const hooks = finishHooks;
      finishHooks = [];
      for (const hook of hooks) await hook();
    }
  }
  for (const hook of afterAllHooks) await hook();
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exitCode = failed > 0 || passed === 0 ? 1 : 0;
}
