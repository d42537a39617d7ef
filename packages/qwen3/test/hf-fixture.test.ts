/**
 * The cpu engine against Hugging Face transformers on a committed fixture: a tiny Qwen3 (vocab 512, hidden 64,
 * 2 layers, 4/2 heads of 16) with random weights, written by transformers' save_pretrained on the H100 host,
 * with a 16-token prompt and HF's logits over 16 greedy steps (packages/qwen3/oracle/hf_reference.py, float32,
 * eager attention). The checkpoint goes through our own safetensors reader and loader, so this also checks that
 * we read HF's files the way HF wrote them.
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadWeights } from '../src/checkpoint/index.js';
import { compareTeacherForced, readReference } from '../src/compare.js';
import { parseQwen3Config } from '../src/config.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { QkCheckpointError } from '../src/errors.js';

const FIXTURE = join(import.meta.dirname, 'fixtures/hf-tiny');

describe('cpu engine vs HF transformers (committed fixture)', () => {
  it('matches HF logits at every teacher-forced step and agrees on every argmax', async () => {
    const config = parseQwen3Config(JSON.parse(await readFile(join(FIXTURE, 'config.json'), 'utf8')));
    expect(config.vocabSize).toBe(512);
    const reference = await readReference(FIXTURE);
    expect(reference.greedyIds).toHaveLength(16);
    const weights = await loadWeights(FIXTURE, config, { dtype: 'f32', device: 'cpu' });
    const engine = createCpuEngine(config, weights, {
      maxContext: reference.promptIds.length + reference.greedyIds.length,
    });
    const result = compareTeacherForced(engine, reference);
    engine.dispose();
    // Both sides compute in float32; logits are O(0.1) here, so 1e-5 is ~1e-4 relative.
    expect(result.maxAbs).toBeLessThan(1e-5);
    expect(result.agreement).toBe(1);
    for (const step of result.steps) expect(step.argmax).toBe(step.referenceArgmax);
  });

  it('notices a wrong weight: one flipped element of the checkpoint moves the logits', async () => {
    const config = parseQwen3Config(JSON.parse(await readFile(join(FIXTURE, 'config.json'), 'utf8')));
    const reference = await readReference(FIXTURE);
    const weights = await loadWeights(FIXTURE, config, { dtype: 'f32', device: 'cpu' });
    const w = weights.layers[1]!.down.data as Float32Array;
    w[7] = -w[7]! + 0.5;
    const engine = createCpuEngine(config, weights, { maxContext: 64 });
    const result = compareTeacherForced(engine, reference);
    engine.dispose();
    expect(result.maxAbs).toBeGreaterThan(1e-4);
  });

  it('compares against a run teacher-forced with other tokens: its own argmaxIds, checked one per step', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'qk-ref-'));
    try {
      await cp(FIXTURE, dir, { recursive: true });
      const meta = JSON.parse(await readFile(join(dir, 'reference.json'), 'utf8')) as Record<string, unknown>;
      const greedy = meta.greedyIds as number[];
      // The fed tokens stay HF's; the run's own argmax differs at step 5 (as a float32 run fed a bf16 run's tokens
      // would): that step, and only that one, disagrees, and the logit differences are the fixture's.
      const own = greedy.map((t, i) => (i === 5 ? (t + 1) % 512 : t));
      await writeFile(join(dir, 'reference.json'), JSON.stringify({ ...meta, argmaxIds: own }));
      const config = parseQwen3Config(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')));
      const reference = await readReference(dir);
      expect(reference.greedyIds).toEqual(greedy);
      expect(reference.argmaxIds).toEqual(own);
      const weights = await loadWeights(dir, config, { dtype: 'f32', device: 'cpu' });
      const engine = createCpuEngine(config, weights, { maxContext: 64 });
      const result = compareTeacherForced(engine, reference);
      engine.dispose();
      expect(result.maxAbs).toBeLessThan(1e-5);
      expect(result.steps.filter((st) => st.argmax !== st.referenceArgmax).map((st) => st.step)).toEqual([5]);
      expect(result.agreement).toBeCloseTo(15 / 16, 12);
      await writeFile(join(dir, 'reference.json'), JSON.stringify({ ...meta, argmaxIds: own.slice(1) }));
      await expect(readReference(dir)).rejects.toBeInstanceOf(QkCheckpointError);
      await expect(readReference(dir)).rejects.toThrow(/one per step/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
