// vitest-shim.mjs, the stand-in for vitest inside GPU test bundles: `.rejects` / `.resolves` apply every matcher to
// the settled value and fail when the promise settles the other way, and a rejection no test awaited fails the
// run (one FAIL line, exit code 1) instead of ending it before the remaining tests ran.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from '../vitest-shim.mjs';

const shim = join(dirname(fileURLToPath(import.meta.url)), '..', 'vitest-shim.mjs');
const dirs = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs a script that imports the shim and registers `body` (lines of test code), then `run()`. */
function runWithShim(body) {
  const dir = mkdtempSync(join(tmpdir(), 'qk-shim-'));
  dirs.push(dir);
  const file = join(dir, 'bundle.mjs');
  writeFileSync(
    file,
    [
      `import { expect, it, run } from ${JSON.stringify(pathToFileURL(shim).href)};`,
      ...body,
      'await run();',
    ].join('\n'),
  );
  return spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 30_000 });
}

describe('vitest shim: .rejects and .resolves', () => {
  it('apply the matcher to the error or the value', async () => {
    const stop = new Error('stop');
    await expect(Promise.reject(stop)).rejects.toBe(stop);
    await expect(Promise.reject(new RangeError('out of range'))).rejects.toThrow(RangeError);
    await expect(Promise.reject(new RangeError('out of range'))).rejects.toThrow(/of range/);
    await expect(Promise.resolve({ a: 1, b: 2 })).resolves.toMatchObject({ a: 1 });
    await expect(Promise.resolve(3)).resolves.toBe(3);
    await expect(Promise.reject(new RangeError('x'))).rejects.toBeInstanceOf(RangeError);
    expect(new TypeError('y')).toBeInstanceOf(Error);
    assert.throws(() => expect(new Error('z')).toBeInstanceOf(RangeError), /to be an instance of RangeError/);
  });

  it('fail on a promise that settles the other way, or a matcher that does not hold', async () => {
    const stop = new Error('stop');
    await assert.rejects(expect(Promise.resolve(1)).rejects.toBe(1), /to reject/);
    await assert.rejects(expect(Promise.reject(stop)).resolves.toBe(1), /to resolve, rejected with stop/);
    await assert.rejects(expect(Promise.reject(stop)).rejects.toBe(new Error('stop')), /to be/);
    await assert.rejects(expect(Promise.resolve(2)).resolves.toBe(3), /to be 3/);
    await assert.rejects(expect(Promise.reject(new TypeError('x'))).rejects.toThrow(RangeError));
  });
});

describe('vitest shim: run()', () => {
  it('counts a rejection no test awaited as a failure and runs the tests after it', () => {
    const r = runWithShim([
      "it('drops a rejected promise', async () => { void Promise.reject(new Error('dropped')); await new Promise((r) => setTimeout(r, 20)); });",
      "it('runs after it', () => expect(1 + 1).toBe(2));",
    ]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /FAIL \(a rejection no test awaited\)\n {2}Error: dropped/);
    assert.match(r.stdout, /PASS runs after it/);
    assert.match(r.stdout, /2 passed, 1 failed, 0 skipped/);
  });
});

describe('vitest shim: .each', () => {
  it('registers one test per row, names from $fields and %s, object rows whole and array rows spread', () => {
    const r = runWithShim([
      "it.each([{ m: 1, n: 2 }, { m: 3, n: 4 }])('m=$m n=$n', ({ m, n }) => expect(n - m).toBe(1));",
      "it.each([[2, 3], [5, 6]])('%s then %s', (a, b) => expect(b - a).toBe(1));",
      "it.skipIf(true).each([{ k: 7 }])('skipped k=$k', () => { throw new Error('ran'); });",
      "it.skipIf(false).each([{ k: 8 }, { k: 9 }])('k=$k', ({ k }) => expect(k).toBe(8));",
    ]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    for (const line of [
      'PASS m=1 n=2',
      'PASS m=3 n=4',
      'PASS 2 then 3',
      'PASS 5 then 6',
      'SKIP skipped k=7',
      'PASS k=8',
    ])
      assert.match(r.stdout, new RegExp(`^${line}$`, 'm'));
    assert.match(r.stdout, /^FAIL k=9$/m);
    assert.match(r.stdout, /5 passed, 1 failed, 1 skipped/);
  });
});
