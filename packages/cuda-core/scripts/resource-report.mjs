#!/usr/bin/env node
// The compiler's register / spill / shared-memory report for every kernel, read from the ptxas output that the
// native build keeps in build/build.log (the build passes -Xptxas=-v). Prints a Markdown table.
// Usage: node scripts/resource-report.mjs [--log FILE] [--filter NAME] [--arch sm_90a]
// The default log is build/ptxas.log, to which every native build appends the ptxas lines of what it compiled
// (a later entry for a kernel replaces an earlier one).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const logAt = process.argv.indexOf('--log');
const logPath =
  logAt >= 0
    ? process.argv[logAt + 1]
    : join(dirname(fileURLToPath(import.meta.url)), '..', 'build', 'ptxas.log');
const log = readFileSync(logPath, 'utf8');
const filterAt = process.argv.indexOf('--filter');
const filter = filterAt >= 0 ? process.argv[filterAt + 1] : undefined;
const archAt = process.argv.indexOf('--arch');
const arch = archAt >= 0 ? process.argv[archAt + 1] : 'sm_90a';

const rows = [];
let current;
for (const line of log.split('\n')) {
  let m = line.match(/Compiling entry function '([^']+)' for '([^']+)'/);
  if (m) {
    current =
      m[2] === arch
        ? { mangled: m[1], stack: 0, spillStores: 0, spillLoads: 0, regs: 0, smem: 0 }
        : undefined;
    continue;
  }
  if (!current) continue;
  m = line.match(/(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/);
  if (m) [current.stack, current.spillStores, current.spillLoads] = m.slice(1).map(Number);
  m = line.match(/Used (\d+) registers(?:.*?(\d+) bytes smem)?/);
  if (m) {
    current.regs = Number(m[1]);
    current.smem = Number(m[2] ?? 0);
    rows.push(current); // a kernel compiled again later appears again: keep the newest
    current = undefined;
  }
}
/** The name without its final parameter list (template arguments such as `(qk::Activation)0` keep theirs). */
function withoutParameters(name) {
  if (!name.endsWith(')')) return name;
  let depth = 0;
  for (let i = name.length - 1; i >= 0; i--) {
    if (name[i] === ')') depth++;
    else if (name[i] === '(' && --depth === 0) return name.slice(0, i);
  }
  return name;
}

const newest = new Map(rows.map((r) => [r.mangled, r]));
rows.length = 0;
rows.push(...newest.values());
const demangled = spawnSync('c++filt', {
  input: rows.map((r) => r.mangled).join('\n'),
  encoding: 'utf8',
}).stdout.split('\n');
rows.forEach((r, i) => {
  r.name = (demangled[i] || r.mangled)
    .replace(/\(anonymous namespace\)::/g, '')
    .replace(/^void /, '')
    .replace(/__nv_bfloat16/g, 'bf16');
  r.name = withoutParameters(r.name);
});
// A kernel whose parameters changed between builds appears under its old mangled name too: keep the newest by name.
const byName = [...new Map(rows.map((r) => [r.name, r])).values()];
const shown = byName
  .filter((r) => !filter || r.name.includes(filter))
  .sort((a, b) => a.name.localeCompare(b.name));
console.log(
  `| kernel (${arch}) | registers | spill stores (B) | spill loads (B) | stack (B) | static smem (B) |`,
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
for (const r of shown)
  console.log(`| \`${r.name}\` | ${r.regs} | ${r.spillStores} | ${r.spillLoads} | ${r.stack} | ${r.smem} |`);
