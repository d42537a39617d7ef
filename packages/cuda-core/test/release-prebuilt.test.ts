/**
 * The release script's checks (scripts/release-prebuilt.mjs) without compiling anything: reading the architectures
 * out of a fatbinary, refusing a binary that lacks one, and the tarball size budget. The full 4-architecture build
 * runs at release time only (about 4× the ~8-minute single-architecture compile).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  archProblems,
  EXPECTED,
  elfSection,
  fatbinContents,
  packReport,
  RELEASE_ARCHS,
} from '../scripts/release-prebuilt.mjs';

/** A fatbinary blob: header (magic, version, header size, payload size) and entries (kind, header size, size, arch). */
function fatbin(entries: { kind: 1 | 2; arch: number; bytes: number }[]): Buffer {
  const parts = entries.map(({ kind, arch, bytes }) => {
    const header = Buffer.alloc(64);
    header.writeUInt16LE(kind, 0);
    header.writeUInt32LE(64, 4);
    header.writeBigUInt64LE(BigInt(bytes), 8);
    header.writeUInt32LE(arch, 28);
    return Buffer.concat([header, Buffer.alloc(bytes, 0xab)]);
  });
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(16);
  head.writeUInt32LE(0xba55ed50, 0);
  head.writeUInt16LE(1, 4);
  head.writeUInt16LE(16, 6);
  head.writeBigUInt64LE(BigInt(body.length), 8);
  return Buffer.concat([head, body]);
}

/** A minimal 64-bit little-endian ELF whose sections are a null one, `.nv_fatbin` holding `payload`, `.shstrtab`. */
function elfWith(payload: Buffer): Buffer {
  const names = Buffer.from('\0.nv_fatbin\0.shstrtab\0', 'latin1');
  const payloadOff = 64;
  const namesOff = payloadOff + payload.length;
  const shoff = namesOff + names.length;
  const header = Buffer.alloc(64);
  header.writeUInt32BE(0x7f454c46, 0);
  header[4] = 2; // 64-bit
  header[5] = 1; // little-endian
  header.writeBigUInt64LE(BigInt(shoff), 0x28);
  header.writeUInt16LE(64, 0x3a);
  header.writeUInt16LE(3, 0x3c);
  header.writeUInt16LE(2, 0x3e);
  const section = (name: number, offset: number, size: number) => {
    const s = Buffer.alloc(64);
    s.writeUInt32LE(name, 0);
    s.writeBigUInt64LE(BigInt(offset), 0x18);
    s.writeBigUInt64LE(BigInt(size), 0x20);
    return s;
  };
  return Buffer.concat([
    header,
    payload,
    names,
    section(0, 0, 0),
    section(1, payloadOff, payload.length),
    section(12, namesOff, names.length),
  ]);
}

describe('release-prebuilt checks', () => {
  it('builds native code for sm_80, sm_86, sm_89 and sm_90a plus PTX', () => {
    expect(RELEASE_ARCHS.split(';')).toEqual(['80-real', '86-real', '89-real', '90a-real', '90-virtual']);
    expect(EXPECTED).toEqual({ elf: [80, 86, 89, 90], ptx: [90] });
  });

  it('reads each architecture out of the .nv_fatbin section (several fatbinaries, one per source file)', () => {
    const release = elfWith(
      Buffer.concat([
        fatbin([80, 86, 89, 90].map((arch) => ({ kind: 2 as const, arch, bytes: 100 }))),
        fatbin([
          { kind: 2, arch: 90, bytes: 50 },
          { kind: 1, arch: 90, bytes: 30 },
        ]),
      ]),
    );
    expect(elfSection(release, '.nv_fatbin')?.offset).toBe(64);
    const contents = fatbinContents(release);
    expect(contents).toEqual({ elf: { 80: 100, 86: 100, 89: 100, 90: 150 }, ptx: { 90: 30 } });
    expect(archProblems(contents)).toEqual([]);
  });

  it("refuses a developer build (sm_90a only) or one that lacks PTX, naming what's missing", () => {
    const dev = fatbinContents(
      elfWith(
        fatbin([
          { kind: 2, arch: 90, bytes: 10 },
          { kind: 1, arch: 90, bytes: 5 },
        ]),
      ),
    );
    expect(archProblems(dev)).toEqual(['no native code for sm_80, sm_86, sm_89']);
    const noPtx = fatbinContents(
      elfWith(fatbin([80, 86, 89, 90].map((arch) => ({ kind: 2 as const, arch, bytes: 1 })))),
    );
    expect(archProblems(noPtx)).toEqual(['no PTX for sm_90']);
    expect(fatbinContents(Buffer.from('not an elf file at all, long enough for the header check'))).toEqual({
      elf: {},
      ptx: {},
    });
  });

  it('the tarball must hold the binary and stay within the size budget', () => {
    const report = (size: number, files = ['package.json', 'qk_cuda.node']) =>
      JSON.stringify([{ size, unpackedSize: size * 2, files: files.map((path) => ({ path })) }]);
    expect(packReport(report(40 * 2 ** 20), 150)).toMatchObject({
      packed: 40 * 2 ** 20,
      unpacked: 80 * 2 ** 20,
    });
    expect(() => packReport(report(200 * 2 ** 20), 150)).toThrow(
      /200\.0 MiB packed, over the 150 MiB budget/,
    );
    expect(() => packReport(report(1, ['package.json']))).toThrow(/would not contain qk_cuda\.node/);
  });

  const built = join(__dirname, '..', 'build', 'Release', 'qk_cuda.node');
  it.runIf(existsSync(built))(
    'reads the developer build of this checkout: sm_90a native code plus compute_90 PTX',
    () => {
      const contents = fatbinContents(readFileSync(built));
      expect(Object.keys(contents.elf)).toContain('90');
      expect(Object.keys(contents.ptx)).toEqual(['90']);
    },
  );
});
