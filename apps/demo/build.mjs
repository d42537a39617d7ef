/** Builds the page into dist/: one bundled, minified script (Preact included) beside the HTML and CSS. */
import { copyFile, mkdir, rm } from 'node:fs/promises';
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
