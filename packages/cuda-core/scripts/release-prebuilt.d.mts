export const RELEASE_ARCHS: string;
export const EXPECTED: { elf: number[]; ptx: number[] };
export const DEFAULT_MAX_PACKED_MB: number;
export interface FatbinContents {
  elf: Record<number, number>;
  ptx: Record<number, number>;
}
export function fatbinContents(so: Buffer): FatbinContents;
export function elfSection(elf: Buffer, name: string): { offset: number; size: number } | undefined;
export function archProblems(contents: FatbinContents, expected?: { elf: number[]; ptx: number[] }): string[];
export function packReport(
  json: string,
  maxPackedMb?: number,
): { packed: number; unpacked: number; files: string[] };
