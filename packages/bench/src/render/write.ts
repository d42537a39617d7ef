/**
 * Writing and re-rendering a result directory: per suite `<suite>.json` (the report), `<suite>.md` and one
 * `<suite>-<chart>.svg` per chart, plus `index.json` and `README.md` for the whole run. Everything but the JSON is
 * derived, so {@link renderReportDir} can redraw a directory long after the GPU run.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  assertValidReport,
  BENCH_SCHEMA,
  type BenchIndex,
  type BenchReport,
  type MachineInfo,
} from '../schema.js';
import { chartFileName, indexMarkdown, reportMarkdown } from './markdown.js';
import { chartSvg } from './svg.js';

/** Options of {@link writeReports}. */
export interface WriteReportsOptions {
  /** Machine recorded in `index.json` (default: the first report's). */
  machine?: MachineInfo;
}

/**
 * Names become file names: keep them to one portable path segment so a report cannot write outside its
 * directory, and so file names survive every file system and URL unescaped.
 */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const toJson = (doc: unknown): string => `${JSON.stringify(doc, null, 1)}\n`;

function parseJson(file: string): unknown {
  const text = readFileSync(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** Validates every report and the file names they lead to; throws before anything is written. */
function checkReports(reports: readonly BenchReport[]): void {
  reports.forEach((r, i) => {
    try {
      assertValidReport(r);
    } catch (e) {
      const name = typeof r?.suite === 'string' ? `"${r.suite}"` : `#${i}`;
      throw new Error(`report ${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!SAFE_NAME.test(r.suite))
      throw new Error(`report "${r.suite}": suite name is not usable as a file name`);
    for (const c of r.charts) {
      if (!SAFE_NAME.test(c.id))
        throw new Error(`report "${r.suite}": chart id "${c.id}" is not usable as a file name`);
    }
  });
  const seen = new Set<string>();
  for (const r of reports) {
    if (seen.has(r.suite)) throw new Error(`two reports of suite "${r.suite}": suite names must be unique`);
    seen.add(r.suite);
  }
}

/** Renders every derived file of the given reports: file name → content. */
function renderFiles(index: BenchIndex, reports: readonly BenchReport[]): Map<string, string> {
  const files = new Map<string, string>();
  // Case-insensitive, because `Ops.md` and `ops.md` are one file on macOS and Windows; this also catches
  // a suite named "index" or "readme", and suite/chart pairs that join to the same SVG name.
  const taken = new Map<string, string>();
  const add = (name: string, content: string) => {
    const key = name.toLowerCase();
    const before = taken.get(key);
    if (before !== undefined)
      throw new Error(`two outputs would share the file name "${name}" (also "${before}")`);
    taken.set(key, name);
    files.set(name, content);
  };
  add('index.json', toJson(index));
  add('README.md', indexMarkdown(index, [...reports]));
  // Reserve the report files' names so no derived file can overwrite one (the caller supplies their content).
  for (const entry of index.suites) add(entry.file, '');
  for (const r of reports) {
    add(`${r.suite}.md`, reportMarkdown(r, { chartLinks: true }));
    if (r.status !== 'ok') continue;
    for (const c of r.charts) add(chartFileName(r.suite, c.id), chartSvg(r, c));
  }
  return files;
}

function writeAll(dir: string, files: Map<string, string>, skip: (name: string) => boolean): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, content] of files) if (!skip(name)) writeFileSync(join(dir, name), content);
}

/**
 * Writes a result directory: `<suite>.json`, `<suite>.md`, one `<suite>-<chart>.svg` per chart of each ok report,
 * `index.json` and `README.md`. Every report is validated (and every file rendered) before anything is written,
 * so an invalid report leaves the directory untouched. Throws on invalid reports, duplicate suite names, names
 * that are not plain file names, and colliding output files.
 *
 * @returns the index written to `index.json`.
 */
export function writeReports(
  dir: string,
  reports: BenchReport[],
  options: WriteReportsOptions = {},
): BenchIndex {
  checkReports(reports);
  const machine = options.machine ?? reports[0]?.machine;
  if (!machine) throw new Error('writeReports: no reports and no machine to describe');
  const index: BenchIndex = {
    schema: BENCH_SCHEMA,
    machine,
    suites: reports.map((r) => ({
      suite: r.suite,
      title: r.title,
      backend: r.backend,
      status: r.status,
      ...(r.status === 'skipped' && r.skipReason !== undefined ? { skipReason: r.skipReason } : {}),
      file: `${r.suite}.json`,
    })),
  };
  const files = renderFiles(index, reports);
  for (const r of reports) files.set(`${r.suite}.json`, toJson(r));
  writeAll(dir, files, () => false);
  return index;
}

/**
 * Reads one report file and validates it against `qk.bench/2`.
 *
 * @throws an Error naming the file when it is not JSON or not a valid report.
 */
export function readReport(file: string): BenchReport {
  const doc = parseJson(file);
  try {
    assertValidReport(doc);
  } catch (e) {
    throw new Error(`${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return doc;
}

function readIndex(file: string): BenchIndex {
  const doc = parseJson(file) as Partial<BenchIndex> | null;
  const bad = (problem: string) => new Error(`${file}: not a valid ${BENCH_SCHEMA} index: ${problem}`);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('not an object');
  if (doc.schema !== BENCH_SCHEMA) throw bad(`schema is ${JSON.stringify(doc.schema)}`);
  if (typeof doc.machine !== 'object' || doc.machine === null) throw bad('machine missing');
  if (!Array.isArray(doc.suites)) throw bad('suites is not an array');
  doc.suites.forEach((s, i) => {
    if (typeof s?.suite !== 'string' || typeof s.file !== 'string')
      throw bad(`suites[${i}] needs suite and file`);
    // The index comes from disk: refuse entries that would read from outside the directory.
    if (!SAFE_NAME.test(s.file)) throw bad(`suites[${i}].file "${s.file}" is not a plain file name`);
  });
  return doc as BenchIndex;
}

/**
 * Re-renders `README.md`, every `<suite>.md` and every chart SVG of an existing result directory from the reports
 * its `index.json` lists, without touching the JSON files (e.g. after a renderer change, without a GPU).
 *
 * @returns the directory's index, as read.
 */
export function renderReportDir(dir: string): BenchIndex {
  const index = readIndex(join(dir, 'index.json'));
  const reports = index.suites.map((entry) => {
    const file = join(dir, entry.file);
    const report = readReport(file);
    if (report.suite !== entry.suite) {
      throw new Error(`${file}: holds suite "${report.suite}" but index.json lists it as "${entry.suite}"`);
    }
    return report;
  });
  checkReports(reports);
  const files = renderFiles(index, reports);
  writeAll(dir, files, (name) => name.endsWith('.json'));
  return index;
}
