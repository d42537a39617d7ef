#!/usr/bin/env node
// Builds the self-contained bundle for GPU hosts with no npm and no network (DESIGN.md §5): the CLI and its JS
// dependencies in one ESM file, the native addon beside it, the Qwen3 tokenizer data, the PyTorch peer and HF oracle
// scripts, and a build-info file.
// A bare `node` plus this folder is all such a host needs:  node DIR/qk.mjs verify
//
// Usage: node apps/cli/scripts/bundle.mjs [--out DIR]   (default DIR: dist-bundle at the repository root)
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const cliDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const root = resolve(cliDir, '../..');
const outArg = process.argv.indexOf('--out');
const out = resolve(outArg >= 0 ? process.argv[outArg + 1] : join(root, 'dist-bundle'));

const addon = join(root, 'packages/cuda-core/build/Release/qk_cuda.node');
if (!existsSync(addon)) {
  console.error(
    `bundle: ${addon} is missing; build the addon first (pnpm --filter @qk/cuda-core build:native, needs nvcc).`,
  );
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'peers'), { recursive: true });

const commit =
  spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim() ||
  'unknown';
const dirty =
  spawnSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).stdout.trim() !== '';

await build({
  entryPoints: [join(cliDir, 'src/main.ts')],
  outfile: join(out, 'qk.mjs'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: false,
  minify: false,
  legalComments: 'none',
  // ESM output still needs `require` for the .node addon and CommonJS dependencies.
  banner: {
    js: "import { createRequire as __qkCreateRequire } from 'node:module'; const require = __qkCreateRequire(import.meta.url);",
  },
  define: { 'process.env.QK_BUNDLE_COMMIT': JSON.stringify(`${commit}${dirty ? '+dirty' : ''}`) },
  logLevel: 'warning',
});
copyFileSync(addon, join(out, 'qk_cuda.node'));
for (const f of readdirSync(join(root, 'packages/bench/peers')))
  copyFileSync(join(root, 'packages/bench/peers', f), join(out, 'peers', f));
// The HF oracle scripts (reference logits, used by `qk model compare`) travel with the peers.
for (const f of readdirSync(join(root, 'packages/qwen3/oracle')))
  copyFileSync(join(root, 'packages/qwen3/oracle', f), join(out, 'peers', f));
// The Qwen3 tokenizer data that @qk/qwen3 ships (with its license note), found by @qk/qwen3 in a `tokenizer/`
// folder beside the running script.
// The demo page that `qk serve` serves at `/`, found in a `demo/` folder beside the running script.
const demo = join(root, 'apps/demo/dist');
if (existsSync(join(demo, 'index.html'))) {
  mkdirSync(join(out, 'demo'), { recursive: true });
  for (const f of readdirSync(demo)) copyFileSync(join(demo, f), join(out, 'demo', f));
} else {
  console.warn(
    `bundle: ${demo} has no built page (pnpm --filter @qk/demo build); qk serve will serve the API only.`,
  );
}
const tokenizerData = join(root, 'packages/qwen3/tokenizer');
mkdirSync(join(out, 'tokenizer'), { recursive: true });
for (const f of ['tokenizer.json', 'tokenizer_config.json', 'NOTICE'])
  copyFileSync(join(tokenizerData, f), join(out, 'tokenizer', f));
// xgrammar's WebAssembly build (structured output, tool calls): one script that @qk/qwen3 compiles itself (it cannot
// be bundled as a module), found in an `xgrammar/` folder beside the running script.
const xgrammar = createRequire(join(root, 'packages/qwen3/package.json')).resolve('@mlc-ai/web-xgrammar');
mkdirSync(join(out, 'xgrammar'), { recursive: true });
copyFileSync(xgrammar, join(out, 'xgrammar', 'index.js'));
const xgrammarPackage = JSON.parse(readFileSync(join(dirname(xgrammar), '..', 'package.json'), 'utf8'));
writeFileSync(
  join(out, 'xgrammar', 'NOTICE'),
  `${xgrammarPackage.name} ${xgrammarPackage.version} (${xgrammarPackage.license}), from https://github.com/mlc-ai/xgrammar\n`,
);
writeFileSync(
  join(out, 'build-info.json'),
  `${JSON.stringify({ commit, dirty, date: new Date().toISOString() }, null, 1)}\n`,
);

const size = (p) =>
  statSync(p).isDirectory() ? readdirSync(p).reduce((s, f) => s + size(join(p, f)), 0) : statSync(p).size;
console.log(
  `bundle: ${out} (${(size(out) / 2 ** 20).toFixed(1)} MiB, commit ${commit}${dirty ? ' +uncommitted changes' : ''})`,
);
console.log(`run it on a GPU host with: node ${join(out, 'qk.mjs')} verify`);
