/**
 * Verify cases of the sampling controls (csrc/kernels/logit_controls.cu). `applyLogitControls` must reproduce the
 * reference bit for bit (the kernel evaluates the same float64 operations in the same order and rounds once), NaN
 * and +∞ planted in some rows included: they must come through unchanged, masked or not. `controlledSample` runs
 * the controls then `sample` on the GPU and checks the ids against the reference's draw from the reference's
 * controlled logits with the same seed: exactly for greedy settings, else by the probability-interval rule of the
 * sampling cases (and the count of ids equal to the CPU's is reported). `addTokenCounts` is exact; `tokenLogprobs`
 * returns exact ids and log-probabilities within the float32 rounding of a float64 sum taken in another order.
 */
import type { FloatDType } from '../../dtype.js';
import {
  addTokenCounts,
  applyLogitControls,
  bitsetWords,
  type LogitControls,
  tokenLogprobs,
} from '../../ops/logit-controls.js';
import { sample } from '../../ops/sampling.js';
import { Rng } from '../../random.js';
import { Tensor } from '../../tensor.js';
import { type Tolerance, toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { compareSampledIds, type SampleRule } from './sampling.js';
import { dims, ODD_WIDTHS, VERIFY_DTYPES } from './shapes.js';

const VOCAB = 151936;

/**
 * Log-probabilities are f32 whatever the logits' dtype, computed from exact input values with a float64 sum taken
 * in another order than the reference's: one f32 rounding of the result, at magnitudes up to ~30.
 */
const LOGPROB_TOLERANCE: Tolerance = { rtol: 1e-6, atol: 2e-5 };

/** The scalar controls of a case. */
interface Scalars {
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  minP: number;
}

const SCALARS: readonly Scalars[] = [
  { repetitionPenalty: 1.3, presencePenalty: 0.8, frequencyPenalty: 0.3, minP: 0.05 },
  { repetitionPenalty: 1, presencePenalty: 1.5, frequencyPenalty: 0, minP: 0 },
  { repetitionPenalty: 0.8, presencePenalty: -0.5, frequencyPenalty: 1.2, minP: 0.2 },
];

/**
 * Random control tensors for `rows` rows of `vocab` (as CPU tensors, in the order the case passes them): counts with
 * about one token in eight generated (1–4 times), a prompt bitset, a bias on one token in sixteen, a mask allowing
 * about 60% of the tokens (always at least one).
 */
function randomControls(rows: number, vocab: number, seed: number): Tensor[] {
  const rng = new Rng(seed);
  const words = bitsetWords(vocab);
  const counts = new Int32Array(rows * vocab);
  const prompt = new Int32Array(rows * words);
  const bias = new Float32Array(rows * vocab);
  const mask = new Int32Array(rows * words);
  for (let i = 0; i < rows * vocab; i++) {
    const u = rng.nextFloat();
    if (u < 1 / 8) counts[i] = 1 + Math.floor(rng.nextFloat() * 4);
    if (rng.nextFloat() < 1 / 16) bias[i] = rng.nextFloat() * 20 - 10;
    const r = Math.floor(i / vocab);
    const t = i % vocab;
    const bit = 1 << (t & 31);
    if (rng.nextFloat() < 1 / 8) prompt[r * words + (t >>> 5)]! |= bit;
    if (rng.nextFloat() < 0.6 || t === (r * 7919) % vocab) mask[r * words + (t >>> 5)]! |= bit;
  }
  return [
    Tensor.fromStorage(counts, [rows, vocab], 'i32'),
    Tensor.fromStorage(prompt, [rows, words], 'i32'),
    Tensor.fromStorage(bias, [rows, vocab], 'f32'),
    Tensor.fromStorage(mask, [rows, words], 'i32'),
  ];
}

/** Logits with NaN and +∞ planted in rows ≡ 1 (mod 3) when `plant`. */
function logitsFor(
  rows: number,
  vocab: number,
  dtype: FloatDType,
  seed: number,
  plant: boolean,
): Tensor<FloatDType> {
  const values = Tensor.randn([rows, vocab], { seed, std: 3 }).toFloat32Array();
  if (plant) {
    for (let r = 1; r < rows; r += 3) {
      values[r * vocab + Math.floor(vocab / 2)] = Number.NaN;
      values[r * vocab + vocab - 1] = Number.POSITIVE_INFINITY;
    }
  }
  return Tensor.fromArray(values, { shape: [rows, vocab], dtype });
}

function controlsOf(
  [counts, promptTokens, bias, mask]: Tensor[],
  s: Scalars,
  temperature: number,
): LogitControls {
  return { counts, promptTokens, bias, mask, ...s, temperature };
}

/** Elements that differ (NaN equals NaN; −∞ equals −∞). */
function exactMismatches(actual: Tensor, expected: Tensor): { count: number; first: string } {
  const a = actual.toArray();
  const e = expected.toArray();
  let count = 0;
  let first = '';
  for (let i = 0; i < e.length; i++) {
    if (!Object.is(a[i], e[i]) && !(Number.isNaN(a[i]) && Number.isNaN(e[i]))) {
      if (count++ === 0) first = `element ${i}: ${a[i]}, the reference has ${e[i]}`;
    }
  }
  return { count, first };
}

function controlsCase(
  dtype: FloatDType,
  rows: number,
  vocab: number,
  s: Scalars,
  tag: VerifyCase['tag'],
): VerifyCase {
  const temperature = 0.8;
  return {
    op: 'applyLogitControls',
    dtype,
    shape: `${dims(rows, vocab)} rep=${s.repetitionPenalty} pres=${s.presencePenalty} freq=${s.frequencyPenalty} minP=${s.minP}`,
    tag,
    tolerance: toleranceFor('applyLogitControls', dtype),
    make(seed) {
      const x = logitsFor(rows, vocab, dtype, seed, true);
      const controls = randomControls(rows, vocab, seed + 1);
      return {
        inputs: [x, ...controls],
        expected: [applyLogitControls(x, controlsOf(controls, s, temperature))],
        run: ([gx, ...gc], [out]) => void applyLogitControls(gx!, { ...controlsOf(gc, s, temperature), out }),
        compare([actual], [want]) {
          const m = exactMismatches(actual!, want!);
          return {
            relL2: m.count / want!.size,
            maxAbs: m.count,
            pass: m.count === 0,
            note: m.count === 0 ? 'bit for bit' : `${m.count} elements differ; ${m.first}`,
          };
        },
      };
    },
  };
}

function controlledSampleCase(
  dtype: FloatDType,
  rows: number,
  vocab: number,
  s: Scalars,
  rule: SampleRule,
  tag: VerifyCase['tag'],
): VerifyCase {
  return {
    op: 'controlledSample',
    dtype,
    shape: `${dims(rows, vocab)} T=${rule.temperature} k=${rule.topK} p=${rule.topP} minP=${s.minP} pres=${s.presencePenalty}`,
    tag,
    tolerance: toleranceFor('sample', dtype),
    make(seed) {
      const x = logitsFor(rows, vocab, dtype, seed, false);
      const controls = randomControls(rows, vocab, seed + 1);
      const sampleSeed = seed + 2;
      const processed = applyLogitControls(x, controlsOf(controls, s, rule.temperature));
      const expected = sample(processed, { ...rule, seed: sampleSeed });
      return {
        inputs: [x, ...controls],
        expected: [expected],
        run([gx, ...gc], [out]) {
          const controlled = applyLogitControls(gx!, controlsOf(gc, s, rule.temperature));
          sample(controlled, { ...rule, seed: sampleSeed, out });
          controlled.dispose();
        },
        compare: ([actual], [want]) =>
          compareSampledIds(
            actual!.toArray(),
            want!.toArray(),
            processed.toFloat32Array(),
            vocab,
            rule,
            sampleSeed,
          ),
      };
    },
  };
}

function countsCase(rows: number, vocab: number, tag: VerifyCase['tag']): VerifyCase {
  return {
    op: 'addTokenCounts',
    dtype: 'f32',
    shape: dims(rows, vocab),
    tag,
    tolerance: toleranceFor('argmax', 'f32'),
    make(seed) {
      const rng = new Rng(seed);
      const counts = Tensor.fromStorage(
        Int32Array.from({ length: rows * vocab }, () => Math.floor(rng.nextFloat() * 5)),
        [rows, vocab],
        'i32',
      );
      // Row 0 holds the −1 of a refused draw: it must be skipped.
      const ids = Tensor.fromStorage(
        Int32Array.from({ length: rows }, (_, r) => (r === 0 ? -1 : Math.floor(rng.nextFloat() * vocab))),
        [rows],
        'i32',
      );
      const expected = counts.clone();
      addTokenCounts(expected, ids);
      return {
        inputs: [counts, ids],
        expected: [expected],
        run([gc, gi], [out]) {
          out!.copyFrom(gc!);
          addTokenCounts(out!, gi!);
        },
      };
    },
  };
}

function logprobsCase(
  dtype: FloatDType,
  rows: number,
  vocab: number,
  topN: number,
  tag: VerifyCase['tag'],
): VerifyCase {
  return {
    op: 'tokenLogprobs',
    dtype,
    shape: `${dims(rows, vocab)} top=${topN}`,
    tag,
    tolerance: LOGPROB_TOLERANCE,
    make(seed) {
      const values = Tensor.randn([rows, vocab], { seed, std: 3 }).toFloat32Array();
      // A tie for first place in row 0 (the lower index must come first) and a masked token in each row.
      values[Math.floor(vocab / 3)] = 20;
      values[vocab - 1] = 20;
      for (let r = 0; r < rows; r++) values[r * vocab + ((r * 31) % vocab)] = Number.NEGATIVE_INFINITY;
      const x = Tensor.fromArray(values, { shape: [rows, vocab], dtype });
      const ids = Tensor.fromStorage(
        Int32Array.from({ length: rows }, (_, r) => (r * 7 + 3) % vocab),
        [rows],
        'i32',
      );
      const want = tokenLogprobs(x, ids, { topN });
      return {
        inputs: [x, ids],
        expected: [want.logprobs, want.topIds, want.topLogprobs],
        run([gx, gi], [lp, ti, tl]) {
          const r = tokenLogprobs(gx!, gi!, { topN });
          lp!.copyFrom(r.logprobs);
          ti!.copyFrom(r.topIds);
          tl!.copyFrom(r.topLogprobs);
          for (const t of [r.logprobs, r.topIds, r.topLogprobs]) t.dispose();
        },
      };
    },
  };
}

export const LOGIT_CONTROLS_CASES: VerifyCase[] = VERIFY_DTYPES.flatMap((dtype) => [
  ...SCALARS.map((s) => controlsCase(dtype, 2, VOCAB, s, 'qwen3-0.6b')),
  ...ODD_WIDTHS.map((n) => controlsCase(dtype, 4, n, SCALARS[0]!, 'odd')),
  controlledSampleCase(
    dtype,
    1,
    VOCAB,
    SCALARS[0]!,
    { temperature: 0.6, topK: 20, topP: 0.95 },
    'qwen3-0.6b',
  ),
  controlledSampleCase(dtype, 4, VOCAB, SCALARS[2]!, { temperature: 1, topK: 0, topP: 1 }, 'qwen3-0.6b'),
  controlledSampleCase(dtype, 4, VOCAB, SCALARS[1]!, { temperature: 0, topK: 0, topP: 1 }, 'qwen3-0.6b'),
  ...ODD_WIDTHS.filter((n) => n > 1).map((n) =>
    controlledSampleCase(dtype, 3, n, SCALARS[0]!, { temperature: 0.9, topK: 5, topP: 0.9 }, 'odd'),
  ),
  logprobsCase(dtype, 2, VOCAB, 20, 'qwen3-0.6b'),
  ...ODD_WIDTHS.filter((n) => n > 1).map((n) => logprobsCase(dtype, 3, n, Math.min(n, 5), 'odd')),
  logprobsCase(dtype, 2, 989, 0, 'edge'),
]).concat([countsCase(1, VOCAB, 'qwen3-0.6b'), countsCase(5, 4097, 'odd')]);
