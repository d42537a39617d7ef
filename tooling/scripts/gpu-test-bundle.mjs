#!/usr/bin/env node
// Bundles vitest test files into one script for a GPU host that has only `node` (no npm, no vitest): the files'
// imports are bundled, `vitest` is replaced by tooling/scripts/vitest-shim.mjs, and the script prints one line per
// test and "N passed, N failed, N skipped". Put the output beside qk_cuda.node in a `pnpm bundle` folder and run it
// there:  node gpu-tests.mjs
// A bundle cannot load @qk/cuda-core lazily: a test file must hand it to @qk/ops itself (useCudaBackend), as
// packages/qwen3/test/layered-engine.test.ts does; `qk verify` is how the op-level CUDA cases run there.
//
// Usage: node tooling/scripts/gpu-test-bundle.mjs OUT.mjs TEST_FILE...
//        (e.g. packages/qwen3/test/layered-engine.test.ts)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const [out, ...files] = process.argv.slice(2);
if (out === undefined || files.length === 0) {
  console.error('usage: node tooling/scripts/gpu-test-bundle.mjs OUT.mjs TEST_FILE...');
  process.exit(2);
}
const { build } = createRequire(join(root, 'apps/cli/package.json'))('esbuild');
const work = mkdtempSync(join(tmpdir(), 'qk-gpu-tests-'));
const entry = join(work, 'entry.mjs');
writeFileSync(
  entry,
  `${files.map((f) => `import ${JSON.stringify(resolve(f))};`).join('\n')}\nimport { run } from 'vitest';\nawait run();\n`,
);
try {
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: resolve(out),
    nodePaths: files.map((f) => join(dirname(resolve(f)), '..', 'node_modules')),
    alias: { vitest: join(root, 'tooling/scripts/vitest-shim.mjs') },
    // Test files are imported for their effect (registering tests), which "sideEffects": false would drop.
    ignoreAnnotations: true,
    banner: {
      js: "import { createRequire as __qkRequire } from 'node:module'; const require = __qkRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
  console.log(`gpu-test-bundle: wrote ${out} (${files.length} test file${files.length === 1 ? '' : 's'})`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
