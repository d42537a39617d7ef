export function prebuiltPackageName(platform?: string, arch?: string): string | null;
export function findPrebuilt(fromDir: string, name?: string | null): string | null;
export function resolveCmakeJs(fromDir: string): string;
export function findNvcc(env?: NodeJS.ProcessEnv): string | null;
export type NativePlan =
  | { action: 'prebuilt'; path: string }
  | { action: 'build'; nvcc: string }
  | { action: 'skip'; why: string; fail: boolean };
export function planNativeBuild(inputs?: {
  env?: NodeJS.ProcessEnv;
  pkgDir?: string;
  prebuilt?: string | null;
  nvcc?: string | null;
}): NativePlan;
