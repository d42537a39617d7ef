/**
 * Depending on just `@qk/ops` from another project: pack it as it would be published, install the tarball
 * into a fresh project outside the workspace with npm, then use it from plain Node (ESM and CommonJS) and from
 * TypeScript — with a PATH that holds no nvcc and no GPU tools.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const tscBin = require.resolve('typescript/bin/tsc');

/** pnpm as the test was launched (`pnpm test` sets npm_execpath), else from PATH. */
function pnpm(args: string[], cwd: string): string {
  const execPath = process.env.npm_execpath;
  if (execPath?.includes('pnpm')) {
    return execFileSync(process.execPath, [execPath, ...args], { cwd, encoding: 'utf8' });
  }
  return execFileSync('pnpm', args, { cwd, encoding: 'utf8' });
}

/** Runs node with only node's own directory on PATH, so nothing can reach nvcc or CUDA tools. */
function isolatedNode(args: string[], cwd: string): string {
  return execFileSync(process.execPath, args, {
    cwd,
    encoding: 'utf8',
    env: { PATH: dirname(process.execPath), HOME: cwd, CUDA_VISIBLE_DEVICES: '' },
  });
}

let work = '';
let project = '';
let tarball = '';

beforeAll(() => {
  if (!existsSync(join(packageDir, 'dist', 'index.js'))) {
    throw new Error('dist/ is missing: build @qk/ops first (turbo runs build before test).');
  }
  work = mkdtempSync(join(tmpdir(), 'qk-ops-consumer-'));
  pnpm(['pack', '--pack-destination', work], packageDir);
  const packed = readdirSync(work).filter((f) => f.endsWith('.tgz'));
  expect(packed).toHaveLength(1);
  tarball = join(work, packed[0]!);
  project = join(work, 'consumer');
  execFileSync('mkdir', [project]);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
  );
  execFileSync('npm', ['install', tarball, '--offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: project,
    encoding: 'utf8',
  });
}, 120_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('@qk/ops installed from its packed tarball', () => {
  it('ships built code, types and sources but no tests, and needs no other package', () => {
    const installed = join(project, 'node_modules', '@qk', 'ops');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    expect(manifest.name).toBe('@qk/ops');
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(JSON.stringify(manifest)).not.toContain('workspace:');
    for (const f of [
      'dist/index.js',
      'dist/index.cjs',
      'dist/index.d.ts',
      'dist/testing.d.ts',
      'README.md',
    ]) {
      expect(existsSync(join(installed, f)), f).toBe(true);
    }
    expect(existsSync(join(installed, 'test'))).toBe(false);
    expect(readdirSync(join(project, 'node_modules', '@qk'))).toEqual(['ops']);
  });

  it('publishes types that import nothing from the optional @qk/cuda-core, @qk/ops/internal included', () => {
    const dist = join(project, 'node_modules', '@qk', 'ops', 'dist');
    const types = readdirSync(dist).filter((f) => /\.d\.c?ts$/.test(f));
    expect(types).toContain('internal.d.ts');
    for (const f of types) {
      // (comments may name the package; code may not)
      const code = readFileSync(join(dist, f), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
      expect(code, f).not.toContain('@qk/cuda-core');
    }
  });

  it('runs an op from plain Node ESM, and its result matches hand-computed math', () => {
    writeFileSync(
      join(project, 'use.mjs'),
      `import { Tensor, rmsnorm } from '@qk/ops';
import { assertClose } from '@qk/ops/testing';
const x = Tensor.fromArray([[3, 4], [1, -1]], { dtype: 'f32' });
const w = Tensor.fromArray([2, 0.5], { dtype: 'f32' });
const y = rmsnorm(x, w, { eps: 1e-6 });
const r0 = Math.sqrt((9 + 16) / 2 + 1e-6), r1 = Math.sqrt(1 + 1e-6);
assertClose(y, [3 / r0 * 2, 4 / r0 * 0.5, 1 / r1 * 2, -1 / r1 * 0.5], { rtol: 1e-6, atol: 1e-6 });
console.log(JSON.stringify({ shape: y.shape, dtype: y.dtype, values: y.toArray() }));
`,
    );
    const out = JSON.parse(isolatedNode(['use.mjs'], project));
    expect(out.shape).toEqual([2, 2]);
    expect(out.dtype).toBe('f32');
    expect(out.values[0]).toBeCloseTo((3 / Math.sqrt(12.5 + 1e-6)) * 2, 5);
  });

  it('loads from CommonJS require as well', () => {
    writeFileSync(
      join(project, 'use.cjs'),
      `const { Tensor, silu } = require('@qk/ops');
const { closeness } = require('@qk/ops/testing');
const y = silu(Tensor.fromArray([0, 1, -2]));
const expected = [0, 1 / (1 + Math.exp(-1)), -2 / (1 + Math.exp(2))];
console.log(JSON.stringify(closeness(y, expected)));
`,
    );
    const c = JSON.parse(isolatedNode(['use.cjs'], project));
    expect(c.count).toBe(3);
    expect(c.relL2).toBeLessThan(1e-6);
  });

  it('type-checks a TypeScript consumer against the published types, and rejects dtype misuse', () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          skipLibCheck: false,
          lib: ['ES2023', 'ESNext.Disposable'],
          types: [],
        },
        files: ['use.mts'],
      }),
    );
    writeFileSync(
      join(project, 'use.mts'),
      `import { Tensor, type Int4Weight, QkShapeError, linear, quantizeInt4, rmsnorm, sample } from '@qk/ops';
import { assertClose, type Tolerance } from '@qk/ops/testing';
const x: Tensor<'bf16'> = Tensor.randn([2, 128], { dtype: 'bf16', seed: 1 });
const w = Tensor.ones([128], 'bf16');
const y: Tensor<'bf16'> = rmsnorm(x, w);
const bits: Uint16Array = y.data;
const q: Int4Weight = quantizeInt4(Tensor.randn([4, 128], { seed: 2 }));
const ids: Tensor<'i32'> = sample(linear(x, Tensor.randn([8, 128], { dtype: 'bf16', seed: 3 })), { seed: 4 });
const tol: Tolerance = { rtol: 1e-2, atol: 1e-1 };
assertClose(y, y.toArray(), tol);
// @ts-expect-error a bf16 tensor is not an f32 tensor
const wrong: Tensor<'f32'> = y;
// @ts-expect-error rmsnorm needs weight and x of one dtype
rmsnorm(x, Tensor.ones([128], 'f32'));
const err: QkShapeError | undefined = undefined;
export { bits, q, ids, wrong, err };
`,
    );
    let output = '';
    try {
      output = execFileSync(process.execPath, [tscBin, '-p', 'tsconfig.json'], {
        cwd: project,
        encoding: 'utf8',
      });
    } catch (e) {
      const failure = e as { stdout?: string; stderr?: string };
      throw new Error(`tsc failed on the consumer project:\n${failure.stdout ?? ''}${failure.stderr ?? ''}`);
    }
    expect(output.trim()).toBe('');
  });
});
