// What `build-native.mjs` does at install, decided from the environment alone so that tests can check every
// branch without a CUDA toolkit: use a prebuilt binary, build from source, or skip with one sentence saying why.
// Tools are found through Node's module resolution (never a fixed node_modules path), so npm's hoisting, pnpm's
// symlinks and yarn's flat layout all work.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The platform package holding the prebuilt addon for this machine, or null where none is published. */
export function prebuiltPackageName(platform = process.platform, arch = process.arch) {
  return platform === 'linux' && arch === 'x64' ? '@qk/cuda-core-linux-x64' : null;
}

/** Path of the prebuilt `qk_cuda.node` that `fromDir` can resolve, or null. */
export function findPrebuilt(fromDir, name = prebuiltPackageName()) {
  if (name === null) return null;
  try {
    const pkgJson = createRequire(join(fromDir, 'noop.js')).resolve(`${name}/package.json`);
    const node = join(dirname(pkgJson), 'qk_cuda.node');
    return existsSync(node) ? node : null;
  } catch {
    return null;
  }
}

/** The cmake-js entry script that `fromDir` resolves, read from its package.json's `bin`. Throws when absent. */
export function resolveCmakeJs(fromDir) {
  const pkgJson = createRequire(join(fromDir, 'noop.js')).resolve('cmake-js/package.json');
  const { bin } = JSON.parse(readFileSync(pkgJson, 'utf8'));
  const rel = typeof bin === 'string' ? bin : bin['cmake-js'];
  return join(dirname(pkgJson), rel);
}

/**
 * nvcc from QK_CUDA_NVCC, CUDACXX, CUDA_HOME, /usr/local/cuda or PATH, or null. `QK_CUDA_NVCC=none` looks nowhere
 * (behave as a machine without a CUDA toolkit, e.g. to test that path on one that has it).
 */
export function findNvcc(env = process.env) {
  if (env.QK_CUDA_NVCC === 'none') return null;
  if (env.QK_CUDA_NVCC) return existsSync(env.QK_CUDA_NVCC) ? env.QK_CUDA_NVCC : null;
  const candidates = [
    env.CUDACXX,
    env.CUDA_HOME && join(env.CUDA_HOME, 'bin', 'nvcc'),
    '/usr/local/cuda/bin/nvcc',
  ];
  for (const c of candidates) if (c && existsSync(c)) return c;
  const which = spawnSync('sh', ['-c', 'command -v nvcc'], { encoding: 'utf8', env });
  return which.status === 0 ? which.stdout.trim() : null;
}

/**
 * The install-time decision.
 * @returns {{ action: 'prebuilt', path: string } | { action: 'build', nvcc: string } |
 *   { action: 'skip', why: string, fail: boolean }}
 */
export function planNativeBuild({ env = process.env, pkgDir, prebuilt, nvcc } = {}) {
  const required = env.QK_CUDA_REQUIRED === '1';
  const fromSource = env.QK_CUDA_BUILD_FROM_SOURCE === '1';
  if (env.QK_CUDA_SKIP_BUILD === '1' && !fromSource)
    return { action: 'skip', why: 'QK_CUDA_SKIP_BUILD=1 is set', fail: required };
  if (!fromSource) {
    const found = prebuilt !== undefined ? prebuilt : findPrebuilt(pkgDir);
    if (found) return { action: 'prebuilt', path: found };
  }
  const compiler = nvcc !== undefined ? nvcc : findNvcc(env);
  if (compiler) return { action: 'build', nvcc: compiler };
  const why = fromSource
    ? 'QK_CUDA_BUILD_FROM_SOURCE=1 asks for a source build but no CUDA compiler (nvcc) was found on PATH, CUDACXX or CUDA_HOME'
    : `no prebuilt binary (${prebuiltPackageName() ?? 'none is published'} for ${process.platform}-${process.arch}) and no CUDA compiler (nvcc) on PATH, CUDACXX or CUDA_HOME`;
  return { action: 'skip', why, fail: required || fromSource };
}
