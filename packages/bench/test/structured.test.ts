/**
 * The structured suite with a stand-in model of known speeds: compile times and constrained rates become rows with
 * the unconstrained rate as their peer, the bars judged from the medians, every schema compiled under new property
 * names; the sampling-controls rows with the same draw without controls as their peer; and a valid report.
 */
import { Rng } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import {
  CONTROLS_CASES,
  runStructuredSuite,
  STRUCTURED_BARS,
  STRUCTURED_SCHEMAS,
  type StructuredDraw,
  type StructuredModel,
  validateReport,
} from '../src/index.js';

/** The stand-in's rate under a draw: sampled 0.8 × greedy; penalties 0.97 ×, min-p 1 ×, log-probabilities 0.5 ×. */
function drawRate(freeRate: number, d: StructuredDraw = {}): number {
  const base = d.temperature === undefined ? freeRate : 0.8 * freeRate;
  if (d.topLogprobs !== undefined) return 0.5 * base;
  return d.presencePenalty !== undefined ? 0.97 * base : base;
}

function fakeModel(rng: Rng, seen: object[], freeRate: number, rateFor: (schema: object) => number) {
  let disposed = 0;
  const draws: (StructuredDraw | undefined)[] = [];
  const model: StructuredModel & { disposed: () => number; draws: typeof draws } = {
    engine: 'megakernel',
    source: 'fake-0.6b',
    generate: async (_prompt, maxTokens, schema, draw) => {
      if (schema !== undefined) seen.push(schema);
      draws.push(draw);
      const jitter = 1 + 0.01 * rng.nextFloat();
      const keys = schema === undefined ? 0 : JSON.stringify(schema).length;
      return {
        grammarMs: schema === undefined ? 0 : (keys / 10) * jitter,
        decodeTokensPerSecond: (schema === undefined ? drawRate(freeRate, draw) : rateFor(schema)) * jitter,
        generatedTokens: schema === undefined ? maxTokens : Math.min(maxTokens, 20),
        finishReason: schema === undefined ? 'length' : 'stop',
      };
    },
    dispose: () => {
      disposed++;
    },
    disposed: () => disposed,
    draws,
  };
  return model;
}

describe('structured suite', () => {
  it('rows per schema: compile ms against ≤ 50 ms, constrained tok/s against the unconstrained rate', async () => {
    const seed = Math.floor(Math.random() * 1e9);
    const rng = new Rng(seed);
    const seen: object[] = [];
    // Constrained decode at 90% of 1,000 tok/s, except the bounded-length schema at 50%.
    const model = fakeModel(rng, seen, 1000, (s) => (JSON.stringify(s).includes('maxLength') ? 500 : 900));
    const runs = 3;
    const r = await runStructuredSuite({ backend: 'cuda', runs, tokens: 64, open: async () => model });
    expect(validateReport(r), `seed ${seed}`).toEqual([]);
    expect(model.disposed()).toBe(1);
    expect(r.peers.map((p) => p.name)).toEqual(['unconstrained', 'plain']);
    const compile = r.rows.filter((x) => x.series === 'compile');
    const decode = r.rows.filter((x) => x.series === 'decode');
    expect(compile.map((x) => x.params.schema)).toEqual(STRUCTURED_SCHEMAS.map((s) => s.name));
    expect(decode).toHaveLength(STRUCTURED_SCHEMAS.length);
    for (const row of compile) {
      expect(row.bar?.met).toBe(row.timing.median <= STRUCTURED_BARS.compileMs);
    }
    for (const row of decode) {
      const peer = row.peers.unconstrained as { time: number; ratio: number };
      expect(peer.ratio).toBeCloseTo(peer.time / row.timing.median, 9);
      const slow = row.params.schema === 'maxLength 24';
      expect(peer.ratio).toBeGreaterThan(slow ? 0.48 : 0.88);
      expect(peer.ratio).toBeLessThan(slow ? 0.52 : 0.92);
      expect(row.bar?.met).toBe(!slow);
      expect(row.tokPerS).toBeCloseTo(1000 / row.timing.median, 9);
    }
    // Controls: one row per case, against its draw without controls (the stand-in's ratios, within its 1% jitter).
    const controls = r.rows.filter((x) => x.series === 'controls');
    expect(controls.map((x) => x.params.controls)).toEqual(CONTROLS_CASES.map((c) => c.name));
    for (const row of controls) {
      const c = CONTROLS_CASES.find((x) => x.name === row.params.controls)!;
      const want = drawRate(1000, c.draw) / drawRate(1000, c.base);
      const peer = row.peers.plain as { time: number; ratio: number };
      expect(peer.ratio).toBeCloseTo(peer.time / row.timing.median, 9);
      expect(Math.abs(peer.ratio - want)).toBeLessThan(0.025);
      expect(row.bar?.met).toBe(peer.ratio >= STRUCTURED_BARS.controlsRatio);
    }
    expect(controls.filter((x) => x.bar?.met === false).map((x) => x.params.controls)).toEqual([
      'greedy, logprobs (top 5)',
    ]);
    // Each case's draw and its base, `runs` times each.
    for (const { draw, base } of CONTROLS_CASES) {
      expect(model.draws.filter((d) => d === draw)).toHaveLength(runs);
      expect(model.draws.filter((d) => d === base).length).toBeGreaterThanOrEqual(runs);
    }
    // A warm-up and `runs` compiles per schema, each under property names no other call used.
    expect(seen).toHaveLength(1 + runs * STRUCTURED_SCHEMAS.length);
    const names = seen.map((s) => Object.keys((s as { properties: object }).properties).join(','));
    expect(new Set(names).size).toBe(names.length);
  });

  it('a model that cannot produce two constrained tokens gives a note instead of a decode row', async () => {
    const model = fakeModel(new Rng(1), [], 1000, () => 0);
    const r = await runStructuredSuite({ backend: 'cpu', runs: 1, tokens: 8, open: async () => model });
    expect(validateReport(r)).toEqual([]);
    expect(r.rows.every((x) => x.series === 'compile' || x.series === 'controls')).toBe(true);
    expect(r.notes).toHaveLength(STRUCTURED_SCHEMAS.length);
  });
});
