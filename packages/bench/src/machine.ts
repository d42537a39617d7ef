import { spawnSync } from 'node:child_process';
import { cpus, platform, release } from 'node:os';
import { cudaAvailable, cudaDeviceInfo } from '@qk/ops';
import type { MachineInfo } from './schema.js';

/** Commit of the code under test: QK_COMMIT (set by bundles), else `git rev-parse HEAD`, else null. */
export function gitCommit(): string | null {
  if (process.env.QK_COMMIT) return process.env.QK_COMMIT;
  if (process.env.QK_BUNDLE_COMMIT) return process.env.QK_BUNDLE_COMMIT;
  const r = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Host facts recorded in every result. */
export function hostInfo(): { node: string; cpu: string | null; commit: string | null; date: string } {
  return {
    node: process.version,
    cpu: cpus()[0]?.model ?? null,
    commit: gitCommit(),
    date: new Date().toISOString(),
  };
}

/** CUDA's integer version (e.g. 13000) as "13.0". */
export function cudaVersionText(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

/** Everything a report says about where it ran: host, code commit, and the GPU when one is usable. */
export function machineInfo(): MachineInfo {
  const host = hostInfo();
  const info: MachineInfo = {
    node: host.node,
    platform: `${platform()} ${release()}`,
    cpu: host.cpu,
    cpuCount: cpus().length,
    commit: host.commit,
    date: host.date,
  };
  if (cudaAvailable()) {
    const d = cudaDeviceInfo();
    info.gpu = {
      name: d.name,
      computeCapability: `${d.computeCapability.major}.${d.computeCapability.minor}`,
      driver: cudaVersionText(d.driverVersion),
      cudaRuntime: cudaVersionText(d.runtimeVersion),
      smCount: d.multiProcessors,
      memoryBytes: d.totalMemoryBytes,
      l2Bytes: d.l2CacheBytes,
    };
  }
  return info;
}
