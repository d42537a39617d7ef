/**
 * Finds `qk_cuda.node`, test-loads it in a child process (so a crash while loading cannot take this process
 * down), and either returns the binding or throws one error that lists every reason the GPU backend is
 * unavailable, each with what to do about it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Binding, ProbeResult } from './binding.js';

const ABI_VERSION = 1;

/** The GPU backend cannot be used; `causes` lists each reason with a remedy. */
export class CudaUnavailableError extends Error {
  readonly code = 'QK_CUDA_UNAVAILABLE';
  readonly causes: readonly string[];
  constructor(causes: string[]) {
    super(`the CUDA backend is unavailable: ${causes.join('; ')}`);
    this.name = 'CudaUnavailableError';
    this.causes = causes;
  }
}

/** Where a candidate binary comes from. */
export type AddonOrigin = 'QK_CUDA_ADDON' | 'bundle' | 'prebuilt' | 'source';

/** One place the addon may be, and why it is tried. */
export interface AddonCandidate {
  readonly path: string;
  readonly origin: AddonOrigin;
  /** Why this binary is (or would be) used, for `qk info`. */
  readonly why: string;
}

/** The platform package holding the prebuilt addon for this machine (see scripts/native-plan.mjs), or undefined. */
const PREBUILT_PACKAGE =
  process.platform === 'linux' && process.arch === 'x64' ? '@qk/cuda-core-linux-x64' : undefined;

/** The prebuilt binary's path when its platform package is installed and holds one. */
function prebuiltAddon(): string | undefined {
  if (PREBUILT_PACKAGE === undefined) return undefined;
  try {
    return createRequire(import.meta.url).resolve(`${PREBUILT_PACKAGE}/qk_cuda.node`);
  } catch {
    return undefined;
  }
}

/**
 * Where the addon may be, in the order tried: `QK_CUDA_ADDON`; beside a bundle; the prebuilt platform package (not
 * with `QK_CUDA_BUILD_FROM_SOURCE=1`); the package's from-source build folder.
 */
export function addonCandidateList(): AddonCandidate[] {
  const list: AddonCandidate[] = [];
  const env = process.env.QK_CUDA_ADDON;
  if (env) list.push({ path: env, origin: 'QK_CUDA_ADDON', why: 'named by QK_CUDA_ADDON' });
  const here = (rel: string) => fileURLToPath(new URL(rel, import.meta.url));
  list.push({ path: here('./qk_cuda.node'), origin: 'bundle', why: 'the binary beside the running bundle' });
  const fromSource = process.env.QK_CUDA_BUILD_FROM_SOURCE === '1';
  const prebuilt = fromSource ? undefined : prebuiltAddon();
  if (prebuilt !== undefined) {
    list.push({
      path: prebuilt,
      origin: 'prebuilt',
      why: `the prebuilt binary of ${PREBUILT_PACKAGE} (sm_80/86/89/90a + PTX; no CUDA toolkit needed)`,
    });
  }
  const noPrebuilt = fromSource
    ? 'QK_CUDA_BUILD_FROM_SOURCE=1 is set'
    : PREBUILT_PACKAGE === undefined
      ? `no prebuilt binary is published for ${process.platform}-${process.arch}`
      : prebuilt === undefined
        ? `${PREBUILT_PACKAGE} is not installed or holds no binary`
        : `the prebuilt binary could not be used`;
  list.push({
    path: here('../build/Release/qk_cuda.node'),
    origin: 'source',
    why: `built from source at install (${noPrebuilt})`,
  });
  return list;
}

/** Paths of {@link addonCandidateList}, in the order tried. */
export function addonCandidates(): string[] {
  return addonCandidateList().map((c) => c.path);
}

let loadedFrom: AddonCandidate | undefined;

/** The binary in use and why it was chosen; undefined until {@link loadBinding} has succeeded. */
export function loadedAddon(): AddonCandidate | undefined {
  return loadedFrom;
}

function describeProbe(p: ProbeResult): string {
  const cudaVersion = (v: number) => `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
  switch (p.stage) {
    case 'driver':
      return p.driverVersion === 0
        ? `no NVIDIA driver was found (${p.error}): install the NVIDIA driver (libcuda.so) on this machine`
        : `the NVIDIA driver supports CUDA ${cudaVersion(p.driverVersion)} but this build needs ${cudaVersion(p.runtimeVersion)} (${p.error}): update the driver`;
    case 'device':
      return `no CUDA device is visible (${p.error}${process.env.CUDA_VISIBLE_DEVICES !== undefined ? `, CUDA_VISIBLE_DEVICES=${process.env.CUDA_VISIBLE_DEVICES}` : ''}): check nvidia-smi and CUDA_VISIBLE_DEVICES`;
    default:
      return `the addon has no code this GPU can run (${p.error}: ${p.errorMessage ?? ''}): rebuild with QK_CUDA_ARCHS set to this GPU's architecture, e.g. QK_CUDA_ARCHS=80-real pnpm --filter @qk/cuda-core build:native`;
  }
}

let cached: { binding: Binding } | { error: CudaUnavailableError } | undefined;

/** Loads the addon once per process; throws {@link CudaUnavailableError} gathering every cause. */
export function loadBinding(): Binding {
  if (cached === undefined) cached = tryLoad();
  if ('error' in cached) throw cached.error;
  return cached.binding;
}

function tryLoad(): { binding: Binding } | { error: CudaUnavailableError } {
  const all = addonCandidateList();
  const candidates = all.map((c) => c.path);
  const found = all.filter((c) => existsSync(c.path));
  if (found.length === 0) {
    const prebuilt =
      PREBUILT_PACKAGE === undefined
        ? ''
        : `reinstall with optional dependencies (${PREBUILT_PACKAGE} holds a prebuilt binary; not --omit=optional), or `;
    return {
      error: new CudaUnavailableError([
        `no qk_cuda.node binary (looked in ${candidates.join(', ')}): ${prebuilt}build it on a machine with the CUDA toolkit with \`pnpm --filter @qk/cuda-core build:native\`, or set QK_CUDA_ADDON to its path`,
      ]),
    };
  }
  const causes: string[] = [];
  for (const candidate of found) {
    const { path } = candidate;
    const script = `const b = require(${JSON.stringify(path)}); process.stdout.write(JSON.stringify({ abi: b.abiVersion, probe: b.probe() }));`;
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 });
    if (child.error || child.status !== 0) {
      const detail = child.signal
        ? `crashed with ${child.signal}`
        : ((child.stderr || child.error?.message || '').split('\n').find((l) => l.includes('Error')) ??
          `exited with ${child.status}`);
      causes.push(`${path} cannot be loaded (${detail.trim()}): rebuild it for this Node and platform`);
      continue;
    }
    const report = JSON.parse(child.stdout) as { abi: number; probe: ProbeResult };
    if (report.abi !== ABI_VERSION) {
      causes.push(`${path} has binding ABI ${report.abi}, this package expects ${ABI_VERSION}: rebuild it`);
      continue;
    }
    if (report.probe.error !== null) {
      causes.push(describeProbe(report.probe));
      continue;
    }
    const require = createRequire(import.meta.url);
    const binding = require(path) as Binding;
    loadedFrom = candidate;
    return { binding };
  }
  return { error: new CudaUnavailableError(causes) };
}

/** Forgets a previous load attempt (tests use it after changing QK_CUDA_ADDON). */
export function resetBindingCache(): void {
  cached = undefined;
  loadedFrom = undefined;
}
