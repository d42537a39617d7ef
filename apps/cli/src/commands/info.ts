import { existsSync } from 'node:fs';
import { addonCandidateList, loadedAddon } from '@qk/cuda-core';
import { cudaDeviceInfo, cudaMemoryStats, cudaStatus } from '@qk/ops';

export const INFO_HELP = `qk info — the GPU backend's status: device, driver, memory, and which binary was loaded and why

Usage: qk info`;

export function infoCommand(argv: string[]): number {
  if (argv.includes('-h') || argv.includes('--help')) {
    console.log(INFO_HELP);
    return 0;
  }
  const status = cudaStatus();
  if (!status.available) {
    console.log(`GPU backend: unavailable — ${status.reason}`);
    console.log(
      `binaries tried, in order:\n${addonCandidateList()
        .map((c) => `  ${c.origin}: ${c.path}${existsSync(c.path) ? '' : ' (absent)'} — ${c.why}`)
        .join('\n')}`,
    );
    return 0;
  }
  const addon = loadedAddon();
  const d = cudaDeviceInfo();
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
  console.log(`GPU backend: available
device:  ${d.name}, compute ${d.computeCapability.major}.${d.computeCapability.minor}, ${d.multiProcessors} SMs, L2 ${(d.l2CacheBytes / 2 ** 20).toFixed(0)} MiB
memory:  ${gib(d.freeMemoryBytes)} free of ${gib(d.totalMemoryBytes)}
driver:  CUDA ${d.driverVersion}, runtime ${d.runtimeVersion}
allocator: ${JSON.stringify(cudaMemoryStats())}
binary:  ${addon === undefined ? 'unknown' : `${addon.path} (${addon.origin}: ${addon.why})`}`);
  return 0;
}
