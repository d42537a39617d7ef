import { cudaDeviceInfo, cudaMemoryStats, cudaStatus } from '@qk/ops';

export const INFO_HELP = `qk info — the GPU backend's status: device, driver, memory

Usage: qk info`;

export function infoCommand(argv: string[]): number {
  if (argv.includes('-h') || argv.includes('--help')) {
    console.log(INFO_HELP);
    return 0;
  }
  const status = cudaStatus();
  if (!status.available) {
    console.log(`GPU backend: unavailable — ${status.reason}`);
    return 0;
  }
  const d = cudaDeviceInfo();
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
  console.log(`GPU backend: available
device:  ${d.name}, compute ${d.computeCapability.major}.${d.computeCapability.minor}, ${d.multiProcessors} SMs, L2 ${(d.l2CacheBytes / 2 ** 20).toFixed(0)} MiB
memory:  ${gib(d.freeMemoryBytes)} free of ${gib(d.totalMemoryBytes)}
driver:  CUDA ${d.driverVersion}, runtime ${d.runtimeVersion}
allocator: ${JSON.stringify(cudaMemoryStats())}`);
  return 0;
}
