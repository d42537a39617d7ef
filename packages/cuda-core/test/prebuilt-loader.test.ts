/**
 * The loader's choice between the prebuilt platform package and the from-source build, on this machine (no GPU):
 * a binary placed in @qk/cuda-core-linux-x64 (linked into the workspace) is tried before build/Release, and
 * QK_CUDA_BUILD_FROM_SOURCE=1 takes it out of the list. The stand-in binary is not a real addon, so loading it fails
 * with a cause that names it.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addonCandidateList, cudaStatus, loadedAddon, resetBindingCache } from '../src/index.js';

const platformDir = join(__dirname, '..', '..', 'cuda-core-linux-x64');
const standIn = join(platformDir, 'qk_cuda.node');
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';
const realBinaryThere = existsSync(standIn);

afterEach(() => {
  delete process.env.QK_CUDA_BUILD_FROM_SOURCE;
  if (!realBinaryThere) rmSync(standIn, { force: true });
  resetBindingCache();
});

describe.runIf(linuxX64 && !realBinaryThere)('prebuilt binary first', () => {
  it('without a binary in the platform package: bundle, then the source build, saying why', () => {
    const list = addonCandidateList();
    expect(list.map((c) => c.origin)).toEqual(['bundle', 'source']);
    expect(list[1]?.why).toMatch(/@qk\/cuda-core-linux-x64 is not installed or holds no binary/);
  });

  it('with one: tried before build/Release, and named in the cause when it cannot load', () => {
    writeFileSync(standIn, 'not an ELF file');
    const list = addonCandidateList();
    expect(list.map((c) => c.origin)).toEqual(['bundle', 'prebuilt', 'source']);
    expect(list[1]?.path).toMatch(/cuda-core-linux-x64[\\/]qk_cuda\.node$/);
    expect(list[1]?.why).toMatch(/prebuilt binary of @qk\/cuda-core-linux-x64/);
    const status = cudaStatus();
    expect(status.available).toBe(false);
    if (!status.available)
      expect(status.causes.join('\n')).toMatch(/cuda-core-linux-x64[\\/]qk_cuda\.node cannot be loaded/);
    expect(loadedAddon()).toBeUndefined();
  });

  it('QK_CUDA_BUILD_FROM_SOURCE=1 leaves the prebuilt binary out', () => {
    writeFileSync(standIn, 'not an ELF file');
    process.env.QK_CUDA_BUILD_FROM_SOURCE = '1';
    const list = addonCandidateList();
    expect(list.map((c) => c.origin)).toEqual(['bundle', 'source']);
    expect(list[1]?.why).toMatch(/QK_CUDA_BUILD_FROM_SOURCE=1 is set/);
  });
});
