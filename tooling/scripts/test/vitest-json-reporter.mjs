// A node:test reporter that writes test-results/vitest.json in the shape vitest's JSON reporter gives (the fields
// ci-summary.mjs reads: testResults[].status and .assertionResults[].status), so the tests of this package count in
// CI's "N passed, N failed, N skipped" line like every other package's. It prints nothing; pair it with `spec`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

const OUT = resolve('test-results/vitest.json');

export default async function* vitestJson(source) {
  /** file → { assertionResults, failed } */
  const files = new Map();
  const fileOf = (data) => {
    const name = data.file ?? '(unknown file)';
    if (!files.has(name)) files.set(name, { assertionResults: [], failed: false });
    return files.get(name);
  };
  for await (const { type, data } of source) {
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    const file = fileOf(data);
    if (data.details?.type === 'suite') {
      if (type === 'test:fail') file.failed = true;
      continue;
    }
    const status =
      data.skip !== undefined && data.skip !== false
        ? 'skipped'
        : data.todo !== undefined && data.todo !== false
          ? 'todo'
          : type === 'test:pass'
            ? 'passed'
            : 'failed';
    if (status === 'failed') file.failed = true;
    file.assertionResults.push({
      title: data.name,
      fullName: data.name,
      status,
      duration: data.details?.duration_ms ?? 0,
      failureMessages:
        status === 'failed' ? [String(data.details?.error?.message ?? data.details?.error ?? '')] : [],
    });
  }
  const testResults = [...files].map(([name, f]) => ({
    name,
    status: f.failed ? 'failed' : 'passed',
    assertionResults: f.assertionResults,
  }));
  const all = testResults.flatMap((f) => f.assertionResults);
  const count = (s) => all.filter((r) => r.status === s).length;
  const report = {
    numTotalTests: all.length,
    numPassedTests: count('passed'),
    numFailedTests: count('failed'),
    numPendingTests: count('skipped'),
    numTodoTests: count('todo'),
    success: testResults.every((f) => f.status === 'passed'),
    testResults,
  };
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
  yield '';
}
