/**
 * Every verify case (packages/ops/src/verify/cases) as a test: the CUDA kernel against its reference on fresh
 * random inputs with poisoned outputs. Without a usable GPU each case is reported as skipped, never as passed.
 */
import { describe, expect, it } from 'vitest';
import { cudaAvailable, cudaStatus } from '../src/index.js';
import { ALL_CASES, runVerify } from '../src/verify/index.js';

const gpu = cudaAvailable();

describe(`CUDA kernels vs references (${gpu ? 'GPU present' : `skipped: ${cudaStatus().reason}`})`, () => {
  it('has cases for every family', () => {
    expect(ALL_CASES.length).toBeGreaterThan(0);
    expect(new Set(ALL_CASES.map((c) => c.op)).has('rmsnorm')).toBe(true);
  });

  for (const c of ALL_CASES) {
    it.skipIf(!gpu)(`${c.op} ${c.dtype} ${c.shape} (${c.tag})`, () => {
      const report = runVerify({ cases: [c] });
      const row = report.rows[0]!;
      expect(row.status, `${row.note ?? ''} relL2=${row.relL2} maxAbs=${row.maxAbs} seed=${row.seed}`).toBe(
        'pass',
      );
    });
  }

  it.runIf(!gpu)('reports GPU cases as skipped with the reason when no GPU is usable', () => {
    const report = runVerify({ cases: ALL_CASES.slice(0, 3) });
    expect(report.passed).toBe(0);
    expect(report.skipped).toBe(3);
    expect(report.skipReason).toMatch(/cuda/);
  });
});
