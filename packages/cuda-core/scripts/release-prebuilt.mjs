#!/usr/bin/env node
// Builds the prebuilt addon for @qk/cuda-core-linux-x64 (run on a Linux x64 machine with the CUDA toolkit, at
// release time, before `changeset publish`):
//   1. compile from source with QK_CUDA_ARCHS = RELEASE_ARCHS (native sm_80, sm_86, sm_89, sm_90a + compute_90 PTX)
//      into build/release-prebuilt/ (the developer build in build/Release is left alone);
//   2. check the fatbinary holds exactly those architectures (parsed from the .nv_fatbin section, no CUDA tools needed);
//   3. copy it to packages/cuda-core-linux-x64/qk_cuda.node with build-info.json (archs, CUDA version, commit, sha256);
//   4. measure the tarball with `npm pack --dry-run --json` and fail above the size budget.
// `--check-only` runs steps 2 and 4 on what is already in the platform package (its prepublishOnly hook, so an empty
// or single-arch package cannot be published). `--plan` prints what would run and exits.
//
// Usage: node packages/cuda-core/scripts/release-prebuilt.mjs [--plan | --check-only] [--max-packed-mb N]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findNvcc, resolveCmakeJs } from './native-plan.mjs';

/** CMake CUDA_ARCHITECTURES of a release: native code for Ampere (sm_80, sm_86), Ada (sm_89), Hopper (sm_90a). */
export const RELEASE_ARCHS = '80-real;86-real;89-real;90a-real;90-virtual';
/** What the fatbinary must then hold: ELF (SASS) per real arch, PTX for the virtual one. */
export const EXPECTED = { elf: [80, 86, 89, 90], ptx: [90] };
/** Packed (gzip) size above which the release stops: far below what the npm registry takes, and a fair download. */
export const DEFAULT_MAX_PACKED_MB = 150;

const FATBIN_MAGIC = 0xba55ed50;

/**
 * The CUDA code in an ELF shared object: per kind (`elf` = SASS, `ptx`), the architectures and bytes, read from the
 * `.nv_fatbin` section (fatbinary headers: magic, version, header size, payload size; then entries of kind 1 = PTX,
 * 2 = ELF, with the SM version at offset 28).
 * @param {Buffer} so
 */
export function fatbinContents(so) {
  const section = elfSection(so, '.nv_fatbin');
  if (section === undefined) return { elf: {}, ptx: {} };
  const out = { elf: {}, ptx: {} };
  const end = section.offset + section.size;
  for (let p = section.offset; p + 16 <= end; ) {
    if (so.readUInt32LE(p) !== FATBIN_MAGIC) {
      p += 8;
      continue;
    }
    const headerSize = so.readUInt16LE(p + 6);
    const fatSize = Number(so.readBigUInt64LE(p + 8));
    for (let q = p + headerSize; q < p + headerSize + fatSize; ) {
      const kind = so.readUInt16LE(q);
      const entryHeader = so.readUInt32LE(q + 4);
      const size = Number(so.readBigUInt64LE(q + 8));
      const arch = so.readUInt32LE(q + 28);
      const bucket = kind === 1 ? out.ptx : kind === 2 ? out.elf : undefined;
      if (bucket) bucket[arch] = (bucket[arch] ?? 0) + size;
      q += entryHeader + size;
    }
    p += headerSize + fatSize;
  }
  return out;
}

/** Offset and size of a named section of a 64-bit little-endian ELF file, or undefined. */
export function elfSection(elf, name) {
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) return undefined;
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const shentsize = elf.readUInt16LE(0x3a);
  const shnum = elf.readUInt16LE(0x3c);
  const shstrndx = elf.readUInt16LE(0x3e);
  const header = (i) => shoff + i * shentsize;
  const strtab = Number(elf.readBigUInt64LE(header(shstrndx) + 0x18));
  for (let i = 0; i < shnum; i++) {
    const h = header(i);
    const nameOff = elf.readUInt32LE(h);
    const end = elf.indexOf(0, strtab + nameOff);
    if (elf.toString('latin1', strtab + nameOff, end) === name) {
      return { offset: Number(elf.readBigUInt64LE(h + 0x18)), size: Number(elf.readBigUInt64LE(h + 0x20)) };
    }
  }
  return undefined;
}

/** Problems with a fatbinary's architectures against {@link EXPECTED}: missing and unexpected ones. */
export function archProblems(contents, expected = EXPECTED) {
  const problems = [];
  for (const kind of ['elf', 'ptx']) {
    const have = Object.keys(contents[kind])
      .map(Number)
      .sort((a, b) => a - b);
    const want = expected[kind];
    const missing = want.filter((a) => !have.includes(a));
    const extra = have.filter((a) => !want.includes(a));
    if (missing.length)
      problems.push(`no ${kind === 'elf' ? 'native code' : 'PTX'} for sm_${missing.join(', sm_')}`);
    if (extra.length)
      problems.push(`unexpected ${kind === 'elf' ? 'native code' : 'PTX'} for sm_${extra.join(', sm_')}`);
  }
  return problems;
}

/** `npm pack --dry-run --json` output → sizes in bytes; throws when over budget or without the binary. */
export function packReport(json, maxPackedMb = DEFAULT_MAX_PACKED_MB) {
  const [entry] = JSON.parse(json);
  const files = entry.files.map((f) => f.path);
  if (!files.includes('qk_cuda.node')) throw new Error('the tarball would not contain qk_cuda.node');
  if (entry.size > maxPackedMb * 2 ** 20) {
    throw new Error(
      `the tarball would be ${(entry.size / 2 ** 20).toFixed(1)} MiB packed, over the ${maxPackedMb} MiB budget (--max-packed-mb)`,
    );
  }
  return { packed: entry.size, unpacked: entry.unpackedSize, files };
}

function main() {
  const args = process.argv.slice(2);
  const coreDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const platformDir = resolve(coreDir, '../cuda-core-linux-x64');
  const target = join(platformDir, 'qk_cuda.node');
  const maxArg = args.indexOf('--max-packed-mb');
  const maxPackedMb = maxArg >= 0 ? Number(args[maxArg + 1]) : DEFAULT_MAX_PACKED_MB;
  const nvcc = findNvcc();
  const buildArgs = [
    'compile',
    '--out',
    'build/release-prebuilt',
    `--CDCMAKE_CUDA_COMPILER=${nvcc ?? 'nvcc'}`,
    ...(process.env.QK_CUDA_PARALLEL ? ['--parallel', process.env.QK_CUDA_PARALLEL] : []),
  ];
  if (args.includes('--plan')) {
    console.log(`QK_CUDA_ARCHS=${RELEASE_ARCHS} node ${resolveCmakeJs(coreDir)} ${buildArgs.join(' ')}`);
    console.log(
      `then: check ${JSON.stringify(EXPECTED)}, copy to ${target}, npm pack --dry-run (budget ${maxPackedMb} MiB)`,
    );
    return;
  }
  if (!args.includes('--check-only')) {
    if (process.platform !== 'linux' || process.arch !== 'x64')
      throw new Error('release builds run on linux-x64');
    if (!nvcc) throw new Error('no nvcc: the release build needs the CUDA toolkit');
    const built = spawnSync(process.execPath, [resolveCmakeJs(coreDir), ...buildArgs], {
      cwd: coreDir,
      stdio: 'inherit',
      env: { ...process.env, QK_CUDA_ARCHS: RELEASE_ARCHS },
    });
    if (built.status !== 0) throw new Error('the release build failed');
    copyFileSync(join(coreDir, 'build', 'release-prebuilt', 'Release', 'qk_cuda.node'), target);
    const cuda = spawnSync(nvcc, ['--version'], { encoding: 'utf8' }).stdout.match(/release ([\d.]+)/)?.[1];
    const commit = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: coreDir, encoding: 'utf8' }).stdout.trim();
    const info = {
      archs: RELEASE_ARCHS,
      cuda,
      napiVersion: 8,
      commit,
      sha256: createHash('sha256').update(readFileSync(target)).digest('hex'),
      date: new Date().toISOString(),
    };
    writeFileSync(join(platformDir, 'build-info.json'), `${JSON.stringify(info, null, 1)}\n`);
  }
  if (!existsSync(target))
    throw new Error(`${target} is missing: run this script without --check-only first`);
  const problems = archProblems(fatbinContents(readFileSync(target)));
  if (problems.length > 0) throw new Error(`${target}: ${problems.join('; ')}`);
  const pack = spawnSync('npm', ['pack', '--dry-run', '--json'], { cwd: platformDir, encoding: 'utf8' });
  if (pack.status !== 0) throw new Error(`npm pack --dry-run failed: ${pack.stderr}`);
  const { packed, unpacked } = packReport(pack.stdout, maxPackedMb);
  console.log(
    `@qk/cuda-core-linux-x64: ${(packed / 2 ** 20).toFixed(1)} MiB packed, ${(unpacked / 2 ** 20).toFixed(1)} MiB unpacked, archs ${RELEASE_ARCHS}`,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (e) {
    console.error(`release-prebuilt: ${e.message}`);
    process.exit(1);
  }
}
