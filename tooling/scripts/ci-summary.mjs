#!/usr/bin/env node
// Sums the vitest JSON reports that every package's `test` task writes (test-results/vitest.json; @qk/scripts writes
// the same shape from node:test) into the one line CI reads: "N passed, N failed, N skipped". A test file that
// failed without a failing test (a crash in beforeAll, an import error) counts as one failure; a package whose report
// is missing counts as one too.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;
let passed = 0;
let failed = 0;
let skipped = 0;
const lines = [];
const failures = [];
for (const group of ['packages', 'apps', 'tooling']) {
  const dir = join(root, group);
  if (!existsSync(dir)) continue;
  for (const name of readdirSync(dir)) {
    const pkgDir = join(dir, name);
    const manifestPath = join(pkgDir, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    if (!manifest.scripts?.test) continue;
    const reportPath = join(pkgDir, 'test-results', 'vitest.json');
    if (!existsSync(reportPath)) {
      failed += 1;
      lines.push(`${manifest.name}: no test report (${reportPath}) — its tests did not run`);
      continue;
    }
    const report = JSON.parse(readFileSync(reportPath, 'utf8'));
    let p = 0;
    let f = 0;
    let s = 0;
    for (const file of report.testResults ?? []) {
      const results = file.assertionResults ?? [];
      const fileFailed = results.filter((r) => r.status === 'failed').length;
      p += results.filter((r) => r.status === 'passed').length;
      s += results.filter(
        (r) => r.status === 'skipped' || r.status === 'pending' || r.status === 'todo',
      ).length;
      f += fileFailed;
      const where = (file.name ?? '').replace(root, '');
      for (const r of results.filter((x) => x.status === 'failed')) {
        failures.push({ where, title: r.fullName ?? r.title, message: (r.failureMessages ?? []).join('\n') });
      }
      if (file.status === 'failed' && fileFailed === 0) {
        f += 1;
        failures.push({ where, title: '(the file failed outside any test)', message: file.message ?? '' });
      }
    }
    passed += p;
    failed += f;
    skipped += s;
    lines.push(`${manifest.name}: ${p} passed, ${f} failed, ${s} skipped`);
  }
}
// The failures come first, with the head of each message, so the tail of a CI log says which test broke and why.
for (const x of failures) {
  console.log(`FAILED ${x.where} > ${x.title}`);
  for (const l of x.message.split('\n').slice(0, 12)) console.log(`    ${l}`);
}
for (const l of lines) console.log(l);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
