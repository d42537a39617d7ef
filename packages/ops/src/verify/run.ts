/**
 * Runs verify cases: fresh random inputs per run, reference on the CPU, the CUDA op on the GPU writing into
 * outputs poisoned with NaN (-1 for integer outputs) so an element the kernel forgot to write cannot pass.
 */
import { cudaStatus } from '../backend/cuda.js';
import { cudaSynchronize } from '../backend/runtime.js';
import { launch } from '../cuda/common.js';
import { isFloatDType } from '../dtype.js';
import { deviceAddress, Tensor } from '../tensor.js';
import { closeness } from '../testing/assert-close.js';
import { roundingStep, type Tolerance } from '../testing/tolerances.js';
import { ALL_CASES } from './cases/index.js';
import { RUNTIME_CHECKS } from './runtime-checks.js';
import type { VerifyCase, VerifyRow } from './types.js';

export interface VerifyOptions {
  /** Only cases whose op name matches (substring or RegExp). */
  filter?: string | RegExp;
  /** Only cases with one of these shape tags (odd, edge, qwen3-0.6b, qwen3-8b). */
  tags?: readonly VerifyCase['tag'][];
  /** Base seed; each case derives its own. Default: a fresh random seed per run. */
  seed?: number;
  /** Called after each case, for streaming output. */
  onRow?: (row: VerifyRow) => void;
  /** Cases to run instead of the built-in sweep (the runtime checks then run only if `runtime` is true). */
  cases?: readonly VerifyCase[];
  /** Run the runtime checks (OOM recovery, graph replay, allocator, dispose, events). Default: with the sweep. */
  runtime?: boolean;
}

export interface VerifyReport {
  rows: VerifyRow[];
  passed: number;
  failed: number;
  skipped: number;
  seed: number;
  /** Why the GPU cases were skipped, when they were. */
  skipReason?: string;
}

function poison(t: Tensor): void {
  // 0xFF bytes are NaN in f32/f16/bf16 and -1 in the integer dtypes.
  launch('verify', (b) => b.memset(deviceAddress(t), 0xff, t.nbytes));
}

function matches(op: string, filter: VerifyOptions['filter']): boolean {
  if (filter === undefined) return true;
  return typeof filter === 'string' ? op.includes(filter) : filter.test(op);
}

/** Runs the sweep (or `options.cases`). GPU cases are reported as skipped, never passed, without a usable GPU. */
export function runVerify(options: VerifyOptions = {}): VerifyReport {
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const cases = (options.cases ?? ALL_CASES).filter(
    (c) => matches(c.op, options.filter) && (options.tags === undefined || options.tags.includes(c.tag)),
  );
  const status = cudaStatus();
  const rows: VerifyRow[] = [];
  cases.forEach((c, i) => {
    const caseSeed = (seed + i * 7919) % 2 ** 31;
    const base = {
      op: c.op,
      dtype: c.dtype,
      shape: c.shape,
      tag: c.tag,
      rtol: c.tolerance.rtol,
      atol: c.tolerance.atol,
      seed: caseSeed,
    };
    let row: VerifyRow;
    if (!status.available) {
      row = { ...base, relL2: null, maxAbs: null, status: 'skipped', note: 'no usable GPU' };
    } else {
      row = runCase(c, caseSeed, base);
    }
    rows.push(row);
    options.onRow?.(row);
  });
  if (options.runtime ?? options.cases === undefined) {
    RUNTIME_CHECKS.forEach((check, i) => {
      const checkSeed = (seed + 104729 * (i + 1)) % 2 ** 31;
      const base = {
        op: 'runtime',
        dtype: '-',
        shape: check.name,
        tag: 'edge',
        rtol: 0,
        atol: 0,
        seed: checkSeed,
      } as const;
      let row: VerifyRow;
      if (!matches('runtime', options.filter)) return;
      if (!status.available)
        row = { ...base, relL2: null, maxAbs: null, status: 'skipped', note: 'no usable GPU' };
      else {
        try {
          const r = check.run(checkSeed);
          row = { ...base, relL2: null, maxAbs: null, status: r.pass ? 'pass' : 'fail', note: r.note };
        } catch (e) {
          row = {
            ...base,
            relL2: null,
            maxAbs: null,
            status: 'error',
            note: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
          };
        }
      }
      rows.push(row);
      options.onRow?.(row);
    });
  }
  const count = (s: VerifyRow['status']) => rows.filter((r) => r.status === s).length;
  return {
    rows,
    passed: count('pass'),
    failed: count('fail') + count('error'),
    skipped: count('skipped'),
    seed,
    ...(status.available ? {} : { skipReason: status.reason }),
  };
}

/**
 * The default judgement of a case's outputs against the reference: the worst relative L2 error ≤ rtol, NaN/±inf
 * in the same places, integer outputs exact, and every element within atol — or, for the outputs listed in
 * `roundingSlack`, within atol plus one rounding step of the dtype at its expected magnitude.
 */
export function judgeOutputs(
  actual: readonly Tensor[],
  expected: readonly Tensor[],
  tolerance: Tolerance,
  roundingSlack: readonly number[] = [],
): { relL2: number; maxAbs: number; pass: boolean; note?: string } {
  let relL2 = 0;
  let maxAbs = 0;
  let nonFinite = 0;
  let beyond = 0;
  let pass = true;
  actual.forEach((a, k) => {
    const e = expected[k]!;
    const m = closeness(a, e);
    relL2 = Math.max(relL2, m.relL2);
    maxAbs = Math.max(maxAbs, m.maxAbs);
    nonFinite += m.nonFiniteMismatches.length;
    if (!isFloatDType(e.dtype)) {
      // Integer outputs must match exactly whatever the float tolerance says.
      if (m.maxAbs > 0) {
        maxAbs = Number.POSITIVE_INFINITY;
        pass = false;
      }
    } else if (roundingSlack.includes(k)) {
      const got = a.toFloat32Array();
      const want = e.toFloat32Array();
      for (let i = 0; i < want.length; i++) {
        if (Math.abs(got[i]! - want[i]!) > tolerance.atol + roundingStep(e.dtype, want[i]!)) beyond++;
      }
    } else if (m.maxAbs > tolerance.atol) {
      pass = false;
    }
  });
  pass = pass && nonFinite === 0 && beyond === 0 && relL2 <= tolerance.rtol;
  const notes = [
    nonFinite ? `${nonFinite} NaN/inf mismatches (unwritten or non-finite outputs)` : '',
    beyond ? `${beyond} elements beyond atol + one rounding step` : '',
  ].filter(Boolean);
  return { relL2, maxAbs, pass, ...(notes.length ? { note: notes.join('; ') } : {}) };
}

function runCase(
  c: VerifyCase,
  seed: number,
  base: Omit<VerifyRow, 'relL2' | 'maxAbs' | 'status'>,
): VerifyRow {
  const owned: Tensor[] = [];
  try {
    const instance = c.make(seed);
    const gpuInputs = instance.inputs.map((t) => t.to('cuda'));
    owned.push(...gpuInputs);
    const outs = instance.expected.map((e) => Tensor.empty(e.shape, e.dtype, 'cuda'));
    owned.push(...outs);
    for (const o of outs) poison(o);
    instance.run(gpuInputs, outs);
    cudaSynchronize();
    const actual = outs.map((o) => o.to('cpu'));
    if (instance.compare) {
      const r = instance.compare(actual, instance.expected);
      return {
        ...base,
        relL2: r.relL2,
        maxAbs: r.maxAbs,
        status: r.pass ? 'pass' : 'fail',
        ...(r.note ? { note: r.note } : {}),
      };
    }
    const bits = instance.checkBits?.(actual, instance.expected);
    const judged = judgeOutputs(actual, instance.expected, c.tolerance, instance.roundingSlack);
    const pass = judged.pass && bits === undefined;
    const note = [judged.note ?? '', bits ?? ''].filter(Boolean).join('; ');
    return {
      ...base,
      relL2: judged.relL2,
      maxAbs: judged.maxAbs,
      status: pass ? 'pass' : 'fail',
      ...(note ? { note } : {}),
    };
  } catch (e) {
    return {
      ...base,
      relL2: null,
      maxAbs: null,
      status: 'error',
      note: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
    };
  } finally {
    for (const t of owned) t.dispose();
  }
}
