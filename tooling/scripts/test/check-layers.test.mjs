// check-layers.mjs on tiny synthetic workspaces written to a temporary folder: a clean tree passes, and a cycle, an
// import up the layers, a library importing the optional addon's code and a src/cuda → src/ops import are each found,
// with the chain that shows them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { checkLayers, readImports } from '../check-layers.mjs';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'check-layers.mjs');
const roots = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** Writes a workspace: `packages` maps a folder under packages/ to its package name and its files under src/. */
function workspace(packages) {
  const root = mkdtempSync(join(tmpdir(), 'qk-check-layers-'));
  roots.push(root);
  for (const [folder, { name, files }] of Object.entries(packages)) {
    const dir = join(root, 'packages', folder);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name }));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, 'src', path)), { recursive: true });
      writeFileSync(join(dir, 'src', path), text);
    }
  }
  return root;
}

/** A clean core of the real layering: cuda-core, and ops whose ops call its CUDA dispatch. */
const cudaCore = {
  name: '@qk/cuda-core',
  files: { 'index.ts': 'export const DTypeCode = { f32: 0 } as const;\n' },
};
const cleanOps = {
  name: '@qk/ops',
  files: {
    'index.ts':
      "export { rmsnorm } from './ops/rmsnorm.js';\nexport type { Weight } from './core/weight.js';\n",
    'core/weight.ts': 'export interface Weight { rows: number }\n',
    'cuda/norm.ts': [
      "import type { DTypeCode } from '@qk/cuda-core';",
      "import type { Weight } from '../core/weight.js';",
      'export function cudaRmsnorm(w: Weight, code: typeof DTypeCode): number { return w.rows + code.f32; }',
      '',
    ].join('\n'),
    'ops/rmsnorm.ts': [
      '// a comment that mentions import { x } from "../nowhere.js" is not an import',
      "import { cudaRmsnorm } from '../cuda/norm.js';",
      "import type { Weight } from '../core/weight.js';",
      'const note = "import(\'../ops/rmsnorm.js\') in a string is not one either";',
      'export function rmsnorm(w: Weight): number { return cudaRmsnorm(w, { f32: 0 }) + note.length; }',
      '',
    ].join('\n'),
  },
};

function run(root) {
  return spawnSync(process.execPath, [script, '--root', root], { encoding: 'utf8' });
}

describe('check-layers', () => {
  it('passes a clean tree, from the CLI with exit code 0', () => {
    const root = workspace({ 'cuda-core': cudaCore, ops: cleanOps });
    assert.deepEqual(checkLayers(root).violations, []);
    const r = run(root);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /5 files in 2 packages, 6 imports: no import cycle/);
  });

  it('finds an import cycle inside a package, type-only imports included, and lists the chain', () => {
    const root = workspace({
      'cuda-core': cudaCore,
      ops: {
        name: '@qk/ops',
        files: {
          'a.ts': "import { b } from './b.js';\nexport const a = () => b();\n",
          'b.ts': "import type { C } from './c.js';\nexport const b = (): C | 0 => 0;\n",
          'c.ts': "\n\nexport type { A } from './a.js';\nexport type C = 1;\n",
        },
      },
    });
    const { violations } = checkLayers(root);
    assert.equal(violations.length, 1);
    assert.equal(violations[0].rule, 'cycle');
    assert.match(
      violations[0].message,
      /@qk\/ops \(3 modules\): packages\/ops\/src\/a\.ts:1 → packages\/ops\/src\/b\.ts:1 → packages\/ops\/src\/c\.ts:3 → packages\/ops\/src\/a\.ts$/,
    );
    const r = run(root);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /check-layers: 1 violation\n {2}\[cycle\] import cycle in @qk\/ops/);
  });

  it('finds an import up the layers, by name, by dynamic import() and by a relative path into another package', () => {
    const root = workspace({
      'cuda-core': {
        name: '@qk/cuda-core',
        files: { 'index.ts': "import type { Tensor } from '@qk/ops';\nexport type T = Tensor;\n" },
      },
      ops: { name: '@qk/ops', files: { 'index.ts': 'export interface Tensor { size: number }\n' } },
      bench: {
        name: '@qk/bench',
        files: {
          'index.ts': [
            "import { Tensor } from '@qk/ops';",
            "export const load = () => import('@qk/qwen3/engine');",
            "export { cudaCore } from '../../cuda-core/src/index.js';",
            'export type { Tensor };',
            '',
          ].join('\n'),
        },
      },
      qwen3: { name: '@qk/qwen3', files: { 'engine.ts': 'export const engine = 1;\n' } },
    });
    const messages = checkLayers(root).violations.map((v) => `${v.rule}: ${v.message}`);
    assert.deepEqual(messages, [
      'layer: packages/bench/src/index.ts:2 → @qk/qwen3/engine (import()): @qk/bench may import only @qk/ops, @qk/cuda-core',
      "layer: packages/bench/src/index.ts:3 → packages/cuda-core/src/index.ts (export from '../../cuda-core/src/index.js'): reaches into @qk/cuda-core by a relative path; import the package by name",
      'layer: packages/cuda-core/src/index.ts:1 → @qk/ops (import type): @qk/cuda-core may import only no workspace package',
    ]);
    assert.equal(run(root).status, 1);
  });

  it('finds a library importing code, not only types, from the optional addon', () => {
    const root = workspace({
      'cuda-core': cudaCore,
      ops: cleanOps,
      qwen3: {
        name: '@qk/qwen3',
        files: {
          'kernel.ts': [
            "import type { DTypeCode } from '@qk/cuda-core';",
            "import { DTypeCode as codes } from '@qk/cuda-core';",
            "export type { DTypeCode as Codes } from '@qk/cuda-core';",
            'export const f32: typeof DTypeCode.f32 = codes.f32;',
            '',
          ].join('\n'),
        },
      },
    });
    const messages = checkLayers(root).violations.map((v) => `${v.rule}: ${v.message}`);
    assert.deepEqual(messages, [
      'layer: packages/qwen3/src/kernel.ts:2 → @qk/cuda-core (import): @qk/qwen3 may import only types from @qk/cuda-core (`import type`), which is optional; reach its code through @qk/ops',
    ]);
  });

  it('finds a src/cuda module of @qk/ops importing src/ops, even for a type', () => {
    const ops = structuredClone(cleanOps);
    ops.files['cuda/norm.ts'] =
      `import type { rmsnorm } from '../ops/rmsnorm.js';\n${ops.files['cuda/norm.ts']}`;
    const root = workspace({ 'cuda-core': cudaCore, ops });
    const { violations } = checkLayers(root);
    assert.deepEqual(
      violations.map((v) => v.rule),
      ['direction', 'cycle'],
    );
    assert.match(
      violations[0].message,
      /^packages\/ops\/src\/cuda\/norm\.ts:1 → packages\/ops\/src\/ops\/rmsnorm\.ts \(import type '\.\.\/ops\/rmsnorm\.js'\): src\/cuda\/\* must not import src\/ops\/\*/,
    );
  });

  it('flags a package missing from the layer table', () => {
    const root = workspace({ extra: { name: '@qk/extra', files: { 'index.ts': 'export {};\n' } } });
    const { violations } = checkLayers(root);
    assert.equal(violations.length, 1);
    assert.match(violations[0].message, /@qk\/extra \(packages\/extra\) is not in the LAYERS table/);
  });
});

describe('readImports', () => {
  it('reads every form of import and re-export, and nothing in comments, strings, templates or regexes', () => {
    const src = [
      "import def, { a, type B } from './one.js';",
      "import * as ns from './two.js';",
      "import type {\n  C,\n  D,\n} from './three.js';",
      "import './four.js';",
      "export * from './five.js';",
      "export * as six from './six.js';",
      "export type { E } from './seven.js';",
      "const lazy = await import('./eight.js');",
      "type M = typeof import('./nine.js');",
      "const r = require('./ten.js');",
      "/* import x from './no1.js'; */ // export * from './no2.js'",
      'const s = \'import y from "./no3.js"\';',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text holds a template literal
      'const t = `export * from "./no4.js" ${1 + 1} import("./no5.js")`;',
      "const re = /import z from '.\\/no6.js'/;",
      'const ratio = 4 / 2; const other = ratio / 2;',
      "x.import('./no7.js');",
      '',
    ].join('\n');
    assert.deepEqual(
      readImports(src).map((i) => `${i.line} ${i.kind} ${i.spec}`),
      [
        '1 import ./one.js',
        '2 import ./two.js',
        '3 import type ./three.js',
        '7 import ./four.js',
        '8 export from ./five.js',
        '9 export from ./six.js',
        '10 export type ./seven.js',
        '11 import() ./eight.js',
        '12 import() ./nine.js',
        '13 require() ./ten.js',
      ],
    );
  });
});
