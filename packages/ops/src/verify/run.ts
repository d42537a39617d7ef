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
    let relL2 = 0;
    let maxAbs = 0;
    let nonFinite = 0;
    actual.forEach((a, k) => {
      const e = instance.expected[k]!;
      const m = closeness(a, e);
      relL2 = Math.max(relL2, m.relL2);
      maxAbs = Math.max(maxAbs, m.maxAbs);
      nonFinite += m.nonFiniteMismatches.length;
      // Integer outputs must match exactly whatever the float tolerance says.
      if (!isFloatDType(e.dtype) && m.maxAbs > 0) maxAbs = Math.max(maxAbs, Number.POSITIVE_INFINITY);
    });
    const bits = instance.checkBits?.(actual, instance.expected);
    const pass =
      nonFinite === 0 && bits === undefined && relL2 <= c.tolerance.rtol && maxAbs <= c.tolerance.atol;
    const notes = [
      nonFinite ? `${nonFinite} NaN/inf mismatches (unwritten or non-finite outputs)` : '',
      bits ?? '',
    ];
    const note = notes.filter(Boolean).join('; ');
    return { ...base, relL2, maxAbs, status: pass ? 'pass' : 'fail', ...(note ? { note } : {}) };
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
