/**
 * Verify cases of the sampling family. argmax must match the reference id for id (ties and NaN planted). A drawn
 * id cannot be compared for equality: the reference sums float64 weights sequentially and the kernel sums them in
 * another (exact fixed-point) way, so at a candidate boundary the two may legitimately pick neighbours. The check
 * instead recomputes the reference's probability intervals from the case's own logits and uniforms and accepts the
 * GPU id iff the draw falls in its interval (± 1e-9 of the total). Greedy settings (temperature 0, topK 1) must
 * match exactly.
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
): VerifyCase {
  const exact = rule.temperature === 0 || rule.topK === 1;
  return {
    op: 'sample',
    dtype,
    shape: `${dims(rows, vocab)} T=${rule.temperature} k=${rule.topK} p=${rule.topP}`,
    tag,
    tolerance: toleranceFor('sample', dtype),
    make(seed) {
      const x = Tensor.rand([rows, vocab], { dtype, seed, low: -8, high: 8 });
      const sampleSeed = seed + 1;
      const options = { ...rule, seed: sampleSeed };
      const expected = sample(x, options);
      return {
        inputs: [x],
        expected: [expected],
        run: ([gx], [out]) => void sample(gx as Tensor<FloatDType>, { ...options, out }),
        compare(actual, [want]) {
          const ids = actual[0]!.toArray();
          const ref = want!.toArray();
          const logits = x.toFloat32Array();
          // The op draws one uniform per row, in row order, from a fresh stream of the case's seed.
          const rng = new Rng(sampleSeed);
          let bad = 0;
          let same = 0;
          let note = '';
          for (let r = 0; r < rows; r++) {
            const u = exact ? 0 : rng.nextFloat();
            if (ids[r] === ref[r]) same++;
            const check = exact
              ? { ok: ids[r] === ref[r], note: `row ${r}: id ${ids[r]}, the reference's argmax is ${ref[r]}` }
              : checkSampleInterval(logits.subarray(r * vocab, (r + 1) * vocab), rule, u, ids[r]!);
            if (!check.ok) {
              if (bad === 0) note = exact ? check.note : `row ${r}: ${check.note}`;
              bad++;
            }
          }
          return {
            relL2: bad / rows,
            maxAbs: bad,
            pass: bad === 0,
            note: bad === 0 ? `${same}/${rows} ids equal the CPU draw` : `${bad}/${rows} rows fail: ${note}`,
          };
        },
      };
    },
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
  // The full cross product on a small vocabulary.
  ...[0.7, 1, 1.5].flatMap((temperature) =>
    [0, 1, 50].flatMap((topK) =>
      [1, 0.9, 0.5].map((topP) => sampleCase(dtype, 8, 1000, { temperature, topK, topP }, 'odd')),
    ),
  ),
]);
