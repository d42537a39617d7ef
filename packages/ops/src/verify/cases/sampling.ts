/**
 * Verify cases of the sampling family. argmax must match the reference id for id (ties and NaN planted). A drawn
 * id cannot be compared for equality: the reference sums float64 weights sequentially and the kernel sums them in
 * another (exact fixed-point) way, so at a candidate boundary the two may legitimately pick neighbours. The check
 * instead recomputes the reference's probability intervals from the case's own logits and uniforms and accepts the
 * GPU id iff the draw falls in its interval (± 1e-9 of the total). Greedy settings (temperature 0, topK 1) must
 * match exactly. Poisoned cases plant NaN, +∞ and an all −∞ row at random positions among healthy rows (with a lone −∞
 * each, a masked token): the kernel must refuse exactly the rows the reference refuses (id −1, which the engines read
 * back as their non-finite check) and draw the others as above.
 */
import type { FloatDType } from '../../dtype.js';
import { argmax, sample } from '../../ops/sampling.js';
import { Rng } from '../../random.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { dims, ODD_WIDTHS, VERIFY_DTYPES } from './shapes.js';

/** The options of `sample` that shape its distribution. */
export interface SampleRule {
  temperature: number;
  topK: number;
  topP: number;
}

/** Relative slack of the interval test: far below one candidate's share, far above float64 summation error. */
export const SAMPLE_INTERVAL_SLACK = 1e-9;

/**
 * Whether `id` is an acceptable draw of `sample`'s rule on one row of logits with uniform `u` (temperature > 0).
 * In the reference's candidate order (logit descending, index ascending), with float64 weights
 * `p_i = exp((x_i − max)/T)` over the first topK, the nucleus is the shortest prefix whose normalised cumulative
 * reaches topP, `total` its weight and `target = u · total`; `id` passes iff it lies in the nucleus and the
 * cumulative weight before it is ≤ target + slack·total while the cumulative through it is > target − slack·total.
 */
export function checkSampleInterval(
  row: ArrayLike<number>,
  rule: SampleRule,
  u: number,
  id: number,
): { ok: boolean; note: string } {
  const n = row.length;
  if (!Number.isInteger(id) || id < 0 || id >= n) return { ok: false, note: `id ${id} is not in [0, ${n})` };
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((a, b) => row[b]! - row[a]! || a - b);
  const kept = rule.topK > 0 ? Math.min(rule.topK, n) : n;
  const max = row[order[0]!]!;
  const probs = new Float64Array(kept);
  let sum = 0;
  for (let i = 0; i < kept; i++) {
    probs[i] = Math.exp((row[order[i]!]! - max) / rule.temperature);
    sum += probs[i]!;
  }
  let nucleus = kept;
  if (rule.topP < 1) {
    let cumulative = 0;
    for (let i = 0; i < kept; i++) {
      cumulative += probs[i]! / sum;
      if (cumulative >= rule.topP) {
        nucleus = i + 1;
        break;
      }
    }
  }
  let total = 0;
  for (let i = 0; i < nucleus; i++) total += probs[i]!;
  const target = u * total;
  const pos = order.indexOf(id);
  if (pos >= nucleus)
    return { ok: false, note: `id ${id} is candidate ${pos}, outside the nucleus of ${nucleus}` };
  let before = 0;
  for (let i = 0; i < pos; i++) before += probs[i]!;
  const after = before + probs[pos]!;
  const slack = SAMPLE_INTERVAL_SLACK * total;
  const ok = before <= target + slack && after > target - slack;
  return {
    ok,
    note: ok
      ? ''
      : `id ${id} (candidate ${pos}) covers (${before}, ${after}] of ${total}, the draw is ${target}`,
  };
}

/** Logits with planted ties (rows ≡ 0 mod 3), NaN beside a larger value (≡ 1) and an all −∞ row (≡ 3 mod 4). */
function plantedLogits(rows: number, n: number, dtype: FloatDType, seed: number): Tensor<FloatDType> {
  const values = Tensor.randn([rows, n], { seed, std: 3 }).toFloat32Array();
  for (let r = 0; r < rows; r++) {
    const row = values.subarray(r * n, (r + 1) * n);
    if (r % 4 === 3) row.fill(Number.NEGATIVE_INFINITY);
    else if (r % 3 === 0) {
      for (const i of [Math.floor(n / 3), Math.floor(n / 2), n - 1]) row[i] = 100;
    } else if (r % 3 === 1) {
      row[Math.min(5, n - 1)] = Number.NaN;
      row[n - 1] = Number.NaN;
      row[Math.min(2, n - 1)] = 1e4;
    }
  }
  return Tensor.fromArray(values, { shape: [rows, n], dtype });
}

/**
 * Plants, at positions drawn from `seed`, NaN in rows ≡ 0 (mod 3), +∞ in rows ≡ 1 and a lone −∞ in rows ≡ 2 (still
 * usable: a masked token), and makes the last row entirely −∞.
 */
function poisonRows(x: Tensor<FloatDType>, seed: number): Tensor<FloatDType> {
  const [rows, n] = x.shape as [number, number];
  const values = x.toFloat32Array();
  const rng = new Rng(seed);
  for (let r = 0; r < rows; r++) {
    const row = values.subarray(r * n, (r + 1) * n);
    const at = Math.min(n - 1, Math.floor(rng.nextFloat() * n));
    if (r === rows - 1) row.fill(Number.NEGATIVE_INFINITY);
    else row[at] = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY][r % 3]!;
  }
  return Tensor.fromArray(values, { shape: [rows, n], dtype: x.dtype });
}

/** Whether the reference `sample` refuses row `r` of `x` (its rule is the same at every temperature). */
function refusedRow(x: Tensor<FloatDType>, r: number): boolean {
  try {
    sample(x.slice(r, r + 1), { temperature: 0 });
    return false;
  } catch {
    return true;
  }
}

function argmaxCase(dtype: FloatDType, rows: number, n: number, tag: VerifyCase['tag']): VerifyCase {
  return {
    op: 'argmax',
    dtype,
    shape: dims(rows, n),
    tag,
    tolerance: toleranceFor('argmax', dtype),
    make(seed) {
      const x = plantedLogits(rows, n, dtype, seed);
      return {
        inputs: [x],
        expected: [argmax(x)],
        run: ([gx], [out]) => void argmax(gx as Tensor<FloatDType>, { out }),
      };
    },
  };
}

function sampleCase(
  dtype: FloatDType,
  rows: number,
  vocab: number,
  rule: SampleRule,
  tag: VerifyCase['tag'],
  poisoned = false,
): VerifyCase {
  return {
    op: 'sample',
    dtype,
    shape: `${dims(rows, vocab)} T=${rule.temperature} k=${rule.topK} p=${rule.topP}${poisoned ? ' poisoned' : ''}`,
    tag,
    tolerance: toleranceFor('sample', dtype),
    make(seed) {
      const healthy = Tensor.rand([rows, vocab], { dtype, seed, low: -8, high: 8 });
      const x = poisoned ? poisonRows(healthy, seed + 2) : healthy;
      const refused = Array.from({ length: rows }, (_, r) => poisoned && refusedRow(x, r));
      const sampleSeed = seed + 1;
      const options = { ...rule, seed: sampleSeed };
      // The reference refuses a call with any refused row: those rows expect −1, the others their own draw (row by row
      // from one stream, one uniform per row as the kernel takes them).
      const rng = new Rng(sampleSeed);
      const expected = poisoned
        ? Tensor.fromArray(
            Array.from({ length: rows }, (_, r) => {
              if (!refused[r]) return sample(x.slice(r, r + 1), { ...rule, rng }).item();
              if (rule.temperature > 0) rng.nextFloat(); // the kernel draws one uniform for every row
              return -1;
            }),
            { shape: [rows], dtype: 'i32' },
          )
        : sample(x, options);
      return {
        inputs: [x],
        expected: [expected],
        // Unchecked: a refused row is written as −1 instead of throwing, which is what is compared. The runner's
        // poison of an i32 output is −1 itself, so poisoned cases first fill it with `vocab` (no id, not −1): a
        // refused row the kernel forgot to write cannot pass.
        run: ([gx], [out]) => {
          if (poisoned) out!.copyFrom(Tensor.fromStorage(new Int32Array(rows).fill(vocab), [rows], 'i32'));
          sample(gx as Tensor<FloatDType>, { ...options, out, checkIds: false });
        },
        compare: (actual, [want]) =>
          compareSampledIds(
            actual[0]!.toArray(),
            want!.toArray(),
            x.toFloat32Array(),
            vocab,
            rule,
            sampleSeed,
            refused,
          ),
      };
    },
  };
}

/**
 * Compares a kernel's sampled ids (one per row of `logits`, rows × vocab) with the reference's: equal ids where the
 * rule is exact (temperature 0, top-k 1) or the row is refused (`refused[r]`: −1 expected), else
 * {@link checkSampleInterval} with the row's uniform, drawn in row order from a fresh stream of `seed` as the op
 * draws them.
 */
export function compareSampledIds(
  ids: ArrayLike<number>,
  ref: ArrayLike<number>,
  logits: Float32Array,
  vocab: number,
  rule: SampleRule,
  seed: number,
  refused: readonly boolean[] = [],
): { relL2: number; maxAbs: number; pass: boolean; note: string } {
  const rows = ids.length;
  const exact = rule.temperature === 0 || rule.topK === 1;
  const rng = new Rng(seed);
  let bad = 0;
  let same = 0;
  let note = '';
  for (let r = 0; r < rows; r++) {
    const u = exact ? 0 : rng.nextFloat();
    if (ids[r] === ref[r]) same++;
    const check =
      exact || refused[r]
        ? { ok: ids[r] === ref[r], note: `id ${ids[r]}, the reference gives ${ref[r]}` }
        : checkSampleInterval(logits.subarray(r * vocab, (r + 1) * vocab), rule, u, ids[r]!);
    if (!check.ok && bad++ === 0) note = `row ${r}: ${check.note}`;
  }
  return {
    relL2: bad / rows,
    maxAbs: bad,
    pass: bad === 0,
    note: bad === 0 ? `${same}/${rows} ids equal the CPU draw` : `${bad}/${rows} rows fail: ${note}`,
  };
}

const VOCAB = 151936;

/** Settings at the real vocabulary: every temperature, topK and topP value, and both row counts. */
const FULL_VOCAB_RULES: readonly [rows: number, rule: SampleRule][] = [
  [1, { temperature: 1, topK: 0, topP: 1 }],
  [8, { temperature: 0.7, topK: 50, topP: 0.9 }],
  [8, { temperature: 1.5, topK: 0, topP: 0.9 }],
  [1, { temperature: 1, topK: 0, topP: 0.5 }],
  [1, { temperature: 1.5, topK: 50, topP: 0.5 }],
  [8, { temperature: 0.7, topK: 0, topP: 1 }],
  [8, { temperature: 1, topK: 1, topP: 1 }],
  [8, { temperature: 0, topK: 0, topP: 1 }],
];

export const SAMPLING_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  argmaxCase(dtype, 8, VOCAB, 'qwen3-0.6b'),
  ...ODD_WIDTHS.map((n) => argmaxCase(dtype, 5, n, 'odd')),
  ...FULL_VOCAB_RULES.map(([rows, rule]) => sampleCase(dtype, rows, VOCAB, rule, 'qwen3-0.6b')),
  // Rows poisoned with NaN / +∞ / all −∞ among healthy ones: greedy (the engines' checked argmax) and drawn.
  ...FULL_VOCAB_RULES.slice(1, 3).map(([rows, rule]) =>
    sampleCase(dtype, rows, VOCAB, rule, 'qwen3-0.6b', true),
  ),
  sampleCase(dtype, 8, VOCAB, { temperature: 0, topK: 0, topP: 1 }, 'qwen3-0.6b', true),
  sampleCase(dtype, 7, 1000, { temperature: 0.7, topK: 50, topP: 0.9 }, 'odd', true),
  sampleCase(dtype, 7, 1000, { temperature: 0, topK: 0, topP: 1 }, 'odd', true),
  // The full cross product on a small vocabulary.
  ...[0.7, 1, 1.5].flatMap((temperature) =>
    [0, 1, 50].flatMap((topK) =>
      [1, 0.9, 0.5].map((topP) => sampleCase(dtype, 8, 1000, { temperature, topK, topP }, 'odd')),
    ),
  ),
]);
