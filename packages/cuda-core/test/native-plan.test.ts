/**
 * The install-time decision of scripts/build-native.mjs, on fake package layouts: tools resolve through Node's
 * module resolution wherever a package manager puts them, a prebuilt binary means no compile, and
 * QK_CUDA_BUILD_FROM_SOURCE / QK_CUDA_SKIP_BUILD / QK_CUDA_REQUIRED do what the README says.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  findNvcc,
  findPrebuilt,
  planNativeBuild,
  prebuiltPackageName,
  resolveCmakeJs,
} from '../scripts/native-plan.mjs';

function fakePackage(root: string, name: string, files: Record<string, string>): string {
  const dir = join(root, 'node_modules', ...name.split('/'));
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  return dir;
}

/** An npm-style hoisted project: @qk/cuda-core and its dependencies side by side under one node_modules. */
function hoistedProject(withPrebuilt: boolean) {
  const root = mkdtempSync(join(tmpdir(), 'qk-native-plan-'));
  const core = fakePackage(root, '@qk/cuda-core', { 'package.json': '{"name":"@qk/cuda-core"}' });
  const cmake = fakePackage(root, 'cmake-js', {
    'package.json': JSON.stringify({ name: 'cmake-js', bin: { 'cmake-js': './bin/cmake-js' } }),
    'bin/cmake-js': '',
  });
  if (withPrebuilt) {
    fakePackage(root, '@qk/cuda-core-linux-x64', {
      'package.json': '{"name":"@qk/cuda-core-linux-x64"}',
      'qk_cuda.node': 'not really a binary',
    });
  }
  return { root, core, cmake };
}

const noTools = { QK_CUDA_NVCC: 'none' } as NodeJS.ProcessEnv;

describe('install-time plan', () => {
  it('resolves cmake-js where npm hoists it (the bug of a fixed node_modules path)', () => {
    const { core, cmake } = hoistedProject(false);
    expect(resolveCmakeJs(core)).toBe(join(cmake, 'bin', 'cmake-js'));
  });

  it('names the platform package only where one is published', () => {
    expect(prebuiltPackageName('linux', 'x64')).toBe('@qk/cuda-core-linux-x64');
    expect(prebuiltPackageName('darwin', 'arm64')).toBeNull();
    expect(prebuiltPackageName('linux', 'arm64')).toBeNull();
  });

  it('finds the prebuilt binary through resolution, and not when the package has no binary', () => {
    const withBinary = hoistedProject(true);
    expect(findPrebuilt(withBinary.core, '@qk/cuda-core-linux-x64')).toBe(
      join(withBinary.root, 'node_modules', '@qk', 'cuda-core-linux-x64', 'qk_cuda.node'),
    );
    const without = hoistedProject(false);
    expect(findPrebuilt(without.core, '@qk/cuda-core-linux-x64')).toBeNull();
    expect(findPrebuilt(without.core, null)).toBeNull();
  });

  it('a prebuilt binary wins: nothing compiles even with nvcc present', () => {
    expect(planNativeBuild({ env: {}, prebuilt: '/p/qk_cuda.node', nvcc: '/usr/bin/nvcc' })).toEqual({
      action: 'prebuilt',
      path: '/p/qk_cuda.node',
    });
  });

  it('QK_CUDA_BUILD_FROM_SOURCE=1 ignores the prebuilt binary, and fails without nvcc', () => {
    const env = { QK_CUDA_BUILD_FROM_SOURCE: '1' };
    expect(planNativeBuild({ env, prebuilt: '/p/qk_cuda.node', nvcc: '/usr/bin/nvcc' })).toEqual({
      action: 'build',
      nvcc: '/usr/bin/nvcc',
    });
    const plan = planNativeBuild({ env, prebuilt: '/p/qk_cuda.node', nvcc: null });
    expect(plan).toMatchObject({ action: 'skip', fail: true });
    expect(plan.action === 'skip' && plan.why).toMatch(/QK_CUDA_BUILD_FROM_SOURCE=1.*no CUDA compiler/);
  });

  it('without a prebuilt binary: build with nvcc, else skip (failing only when QK_CUDA_REQUIRED=1)', () => {
    expect(planNativeBuild({ env: {}, prebuilt: null, nvcc: '/x/nvcc' })).toEqual({
      action: 'build',
      nvcc: '/x/nvcc',
    });
    expect(planNativeBuild({ env: {}, prebuilt: null, nvcc: null })).toMatchObject({
      action: 'skip',
      fail: false,
    });
    expect(planNativeBuild({ env: { QK_CUDA_REQUIRED: '1' }, prebuilt: null, nvcc: null })).toMatchObject({
      action: 'skip',
      fail: true,
    });
  });

  it('QK_CUDA_SKIP_BUILD=1 skips before looking for anything', () => {
    expect(planNativeBuild({ env: { QK_CUDA_SKIP_BUILD: '1' }, prebuilt: '/p', nvcc: '/x' })).toMatchObject({
      action: 'skip',
      why: 'QK_CUDA_SKIP_BUILD=1 is set',
    });
  });

  it('QK_CUDA_NVCC=none hides the toolkit; QK_CUDA_NVCC=PATH names it', () => {
    expect(findNvcc(noTools)).toBeNull();
    const root = mkdtempSync(join(tmpdir(), 'qk-nvcc-'));
    writeFileSync(join(root, 'nvcc'), '');
    expect(findNvcc({ QK_CUDA_NVCC: join(root, 'nvcc') })).toBe(join(root, 'nvcc'));
    expect(findNvcc({ QK_CUDA_NVCC: join(root, 'missing') })).toBeNull();
  });

  it('reads the real workspace layout (pnpm) the same way', () => {
    expect(resolveCmakeJs(join(__dirname, '..'))).toMatch(/cmake-js[\\/]bin[\\/]cmake-js$/);
  });
});
