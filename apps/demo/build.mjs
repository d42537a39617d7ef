/**
 * Builds the page into dist/: one bundled, minified script (Preact included) beside the HTML and CSS, and
 * benchmarks.html with the charts of the latest committed benchmark report (docs/benchmarks/<gpu>/).
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';

await rm('dist', { recursive: true, force: true });
await mkdir('dist');
await build({
  entryPoints: ['src/main.tsx'],
  outfile: 'dist/app.js',
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
});
for (const file of ['index.html', 'style.css']) await copyFile(`src/${file}`, `dist/${file}`);

// The benchmark page: every chart of each committed report, in the report index's order, beside its title.
const reports = '../../docs/benchmarks';
const htmlText = (text) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
const sections = [];
for (const gpu of existsSync(reports) ? (await readdir(reports)).sort() : []) {
  const indexFile = join(reports, gpu, 'index.json');
  if (!existsSync(indexFile)) continue;
  const index = JSON.parse(await readFile(indexFile, 'utf8'));
  const figures = [];
  for (const entry of index.suites) {
    const report = JSON.parse(await readFile(join(reports, gpu, entry.file), 'utf8'));
    for (const chart of report.charts ?? []) {
      const svg = `${report.suite}-${chart.id}.svg`;
      if (!existsSync(join(reports, gpu, svg))) continue;
      const name = `bench-${gpu}-${svg}`;
      await copyFile(join(reports, gpu, svg), join('dist', name));
      figures.push(
        `<figure><img src="${name}" alt="${htmlText(chart.title)}"><figcaption>${htmlText(chart.title)}</figcaption></figure>`,
      );
    }
  }
  const machine = index.machine?.gpu?.name ?? gpu;
  sections.push(
    `<h2>${htmlText(machine)} · commit ${htmlText(String(index.machine?.commit ?? '?'))}</h2>\n${figures.join('\n')}`,
  );
}
await writeFile(
  'dist/benchmarks.html',
  `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>qk benchmarks</title><link rel="stylesheet" href="style.css"></head>
<body class="bench"><main><header><h1>qk benchmarks</h1><a href="/">chat</a></header>
${sections.length > 0 ? sections.join('\n') : '<p>No benchmark report is committed in docs/benchmarks/.</p>'}
<p>Every number beside its peer measured in the same run: see docs/benchmarks.md.</p>
</main></body>
</html>
`,
);
