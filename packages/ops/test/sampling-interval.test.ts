/**
 * The interval rule that the sampling verify cases use to accept a GPU draw (`checkSampleInterval`): it must
 * accept every draw of the CPU reference, reject ids outside the drawn candidate's interval or the nucleus, and
 * tolerate only float64-sized disagreements at a boundary.
 */
import { describe, expect, it } from 'vitest';
import { Rng, sample, Tensor } from '../src/index.js';
import { checkSampleInterval, SAMPLING_CASES, type SampleRule } from '../src/verify/cases/sampling.js';

const RULES: readonly SampleRule[] = [
  { temperature: 1, topK: 0, topP: 1 },
  { temperature: 0.7, topK: 50, topP: 0.9 },
  { temperature: 1.5, topK: 0, topP: 0.5 },
  { temperature: 1, topK: 5, topP: 1 },
];

describe('checkSampleInterval', () => {
  it('accepts every draw of the CPU reference, with the uniforms reproduced from the seed', () => {
    const rows = 6;
    const vocab = 300;
    RULES.forEach((rule, k) => {
      const x = Tensor.randn([rows, vocab], { seed: 41 + k, std: 2 });
      const seed = 900 + k;
      const ids = sample(x, { ...rule, seed }).toArray();
      const logits = x.toFloat32Array();
      const rng = new Rng(seed);
      for (let r = 0; r < rows; r++) {
        const check = checkSampleInterval(
          logits.subarray(r * vocab, (r + 1) * vocab),
          rule,
          rng.nextFloat(),
          ids[r]!,
        );
        expect(check.ok, check.note).toBe(true);
      }
    });
  });

  it('rejects an id whose interval does not hold the draw', () => {
    // Weights ∝ exp(x): ids 0 and 1 take about 0.73 and 0.27 of the mass.
    const row = [1, 0, -30, -30];
    const rule = { temperature: 1, topK: 0, topP: 1 };
    expect(checkSampleInterval(row, rule, 0.5, 0).ok).toBe(true);
    expect(checkSampleInterval(row, rule, 0.5, 1).ok).toBe(false);
    expect(checkSampleInterval(row, rule, 0.9, 1).ok).toBe(true);
    expect(checkSampleInterval(row, rule, 0.9, 0).ok).toBe(false);
    expect(checkSampleInterval(row, rule, 0.5, 7).ok).toBe(false);
  });

  it('rejects candidates outside the top-k set or the nucleus', () => {
    const row = [3, 2, 1, 0];
    expect(checkSampleInterval(row, { temperature: 1, topK: 2, topP: 1 }, 0.999, 2).ok).toBe(false);
    expect(checkSampleInterval(row, { temperature: 1, topK: 2, topP: 1 }, 0.999, 1).ok).toBe(true);
    // Weights 1, e^-1, …: the first candidate alone holds ~0.64 ≥ topP 0.5, so the nucleus is one token.
    expect(checkSampleInterval(row, { temperature: 1, topK: 0, topP: 0.5 }, 0.99, 1).ok).toBe(false);
    expect(checkSampleInterval(row, { temperature: 1, topK: 0, topP: 0.5 }, 0.99, 0).ok).toBe(true);
  });

  it('orders ties by index and accepts either neighbour only within 1e-9 of a boundary', () => {
    // Four equal weights: candidate i (= id i) covers [i/4, (i+1)/4) of the total.
    const row = [0, 0, 0, 0];
    const rule = { temperature: 1, topK: 0, topP: 1 };
    expect(checkSampleInterval(row, rule, 0.3, 1).ok).toBe(true);
    expect(checkSampleInterval(row, rule, 0.3, 0).ok).toBe(false);
    expect(checkSampleInterval(row, rule, 0.3, 2).ok).toBe(false);
    // A draw a hair below the boundary 0.5 belongs to id 1; id 2 is accepted as a rounding disagreement.
    expect(checkSampleInterval(row, rule, 0.5 - 1e-12, 1).ok).toBe(true);
    expect(checkSampleInterval(row, rule, 0.5 - 1e-12, 2).ok).toBe(true);
    expect(checkSampleInterval(row, rule, 0.5 - 1e-6, 2).ok).toBe(false);
  });
});

describe('the poisoned sampling cases', () => {
  const poisoned = SAMPLING_CASES.filter((c) => c.op === 'sample' && c.shape.endsWith('poisoned'));

  it('exist for greedy and drawn rules, at the real and an odd vocabulary', () => {
    const shapes = poisoned.filter((c) => c.dtype === 'bf16').map((c) => c.shape);
    expect(shapes.some((s) => s.includes('151936') && s.includes('T=0 '))).toBe(true);
    expect(shapes.some((s) => s.includes('1000') && s.includes('T=0.7'))).toBe(true);
  });

  it('expect −1 exactly where the reference refuses a row, and fail an output that leaves such a row unwritten', () => {
    for (const c of poisoned.filter((p) => p.shape.includes('1000'))) {
      const instance = c.make(17);
      const [x] = instance.inputs as [Tensor];
      const [rows, vocab] = x.shape as [number, number];
      const want = instance.expected[0]!.toArray();
      const values = x.toFloat32Array();
      for (let r = 0; r < rows; r++) {
        const row = values.subarray(r * vocab, (r + 1) * vocab);
        const refused =
          row.some((v) => Number.isNaN(v) || v === Infinity) || row.every((v) => v === -Infinity);
        expect(want[r] === -1, `${c.shape} row ${r}`).toBe(refused);
      }
      // NaN, +Inf and all −Inf rows are refused; the rows with a lone −Inf are not.
      expect(want.filter((id) => id === -1).length, c.shape).toBe(rows - 2);
      expect(instance.compare!(instance.expected, instance.expected).pass, c.shape).toBe(true);
      const unwritten = Tensor.fromArray(
        want.map((id) => (id === -1 ? vocab : id)),
        { shape: [rows], dtype: 'i32' },
      );
      expect(instance.compare!([unwritten], instance.expected).pass, c.shape).toBe(false);
    }
  });
});
