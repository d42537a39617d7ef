/**
 * The prebuilt addon carries native code for sm_80, sm_86 and sm_89 beside sm_90a (scripts/release-prebuilt.mjs), so
 * every translation unit must compile for those targets too, Hopper-only ones included: their kernels get a body
 * that traps there (the host never launches them below compute capability 9.0). A release build compiles for four
 * architectures (~30 minutes on 2 cores), too slow for every CI run; this compiles only the Hopper-only units
 * (those including common/sm90.cuh, and the megakernel) for sm_80, the oldest target, which is where the
 * multi-architecture release once failed in ptxas. Skipped, visibly, without nvcc.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findNvcc } from '../scripts/native-plan.mjs';

const csrc = resolve(fileURLToPath(new URL('..', import.meta.url)), 'csrc');
const nvcc = findNvcc();
const out = mkdtempSync(join(tmpdir(), 'qk-older-archs-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** Hopper-only translation units: every .cu that includes sm90.cuh, and every .cu of the megakernel. */
function hopperUnits(): string[] {
  const units: string[] = [];
  for (const dir of ['kernels', 'megakernel']) {
    for (const f of readdirSync(join(csrc, dir))) {
      if (!f.endsWith('.cu')) continue;
      const path = join(csrc, dir, f);
      if (dir === 'megakernel' || readFileSync(path, 'utf8').includes('sm90.cuh')) units.push(path);
    }
  }
  return units;
}

function compile(unit: string, arch: number): Promise<{ code: number | null; err: string }> {
  const args = [
    '-std=c++17',
    '--expt-relaxed-constexpr',
    '-O3',
    `--generate-code=arch=compute_${arch},code=sm_${arch}`,
    '-c',
    unit,
    '-o',
    join(out, `${unit.replaceAll('/', '_')}.${arch}.o`),
  ];
  return new Promise((done) => {
    const child = spawn(nvcc!, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => {
      err += String(d);
    });
    child.on('close', (code) => done({ code, err }));
  });
}

describe.skipIf(nvcc === null)('Hopper-only sources compile for the prebuilt binary’s older targets', () => {
  it('finds the Hopper-only units (the GEMM, the attention, the megakernel)', () => {
    const names = hopperUnits().map((p) => p.slice(csrc.length + 1));
    expect(names).toEqual(
      expect.arrayContaining([
        'kernels/gemm_sm90.cu',
        'kernels/attention_prefill_sm90.cu',
        'megakernel/qwen3_decode.cu',
      ]),
    );
  });

  it('each compiles for sm_80 without a ptxas error', async () => {
    // Two at a time: CI machines have two cores.
    const units = hopperUnits();
    const results: { unit: string; code: number | null; err: string }[] = [];
    for (let i = 0; i < units.length; i += 2) {
      const batch = units.slice(i, i + 2);
      results.push(
        ...(await Promise.all(batch.map(async (unit) => ({ unit, ...(await compile(unit, 80)) })))),
      );
    }
    for (const r of results) {
      const errors = r.err
        .split('\n')
        .filter((l) => /error/i.test(l))
        .slice(0, 5)
        .join('\n');
      expect(r.code, `${r.unit}:\n${errors}`).toBe(0);
    }
  }, 300_000);
});
