/**
 * The megakernel engine's options on their way down, without a GPU: `loadQwen3` checks the tuning object before it
 * reads a weight and names the field at fault, and `megakernelEngineOptions` hands on exactly the megakernel's options.
 */
import { QkValueError } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { megakernelEngineOptions } from '../src/engine/index.js';
import { createLayeredEngine } from '../src/engine/layered.js';
import type { MegakernelTuning } from '../src/engine/megakernel/tuning.js';
import { loadQwen3 } from '../src/model.js';
import { randomWeights, smallConfig } from './support/random-model.js';

describe('megakernel options', () => {
  it('loadQwen3 refuses a bad tuning field before loading anything, naming it', async () => {
    const bad: [Record<string, unknown>, string, RegExp][] = [
      [{ inflight: 2, bogus: 1 }, 'megakernelTuning.bogus', /is not a megakernel tuning field/],
      [{ stagedUntil: 1000 }, 'megakernelTuning.stagedUntil', /\[0, 384\], got 1000/],
      [{ kvStage: 0 }, 'megakernelTuning.kvStage', /must be a boolean/],
    ];
    for (const [tuning, field, why] of bad) {
      // (a directory that does not exist: the check comes first, so the error is the tuning's, not the path's)
      const load = loadQwen3('/nonexistent/qwen3', { megakernelTuning: tuning as MegakernelTuning });
      await expect(load).rejects.toThrow(QkValueError);
      await expect(load).rejects.toThrow(`argument "${field}"`);
      await expect(load).rejects.toThrow(why);
    }
  });

  it('createLayeredEngine refuses the old megakernel flag instead of ignoring it', () => {
    const config = smallConfig();
    const weights = randomWeights(config, 1);
    for (const flag of [true, false]) {
      const options = { maxContext: 16, megakernel: flag } as Parameters<typeof createLayeredEngine>[2];
      const call = () => createLayeredEngine(config, weights, options);
      expect(call).toThrow(QkValueError);
      expect(call).toThrow('argument "megakernel"');
      expect(call).toThrow(/createMegakernelEngine/);
    }
    // Without it (the megakernel's own options are ignored: createEngine passes them to every engine) the first
    // check is the device's, as these weights are on the CPU: the flag's check came before it.
    const withSteps = { maxContext: 16, megakernelSteps: 8 } as Parameters<typeof createLayeredEngine>[2];
    expect(() => createLayeredEngine(config, weights, withSteps)).toThrow(/needs its weights on "cuda"/);
  });

  it('loadQwen3 takes a good tuning object on an engine that ignores it', async () => {
    const model = await loadQwen3('tiny', {
      engine: 'cpu',
      maxContext: 16,
      megakernelTuning: { inflight: 2, stagedHf: 0 },
      megakernelSteps: 8,
    });
    expect(model.engine).toBe('cpu');
    model.dispose();
  });

  it('megakernelEngineOptions keeps the megakernel fields that are set, and nothing else', () => {
    const trace = () => {};
    const options = {
      maxContext: 64,
      vocabLimit: 10,
      megakernelSteps: 8,
      megakernelUntil: undefined,
      megakernelScreen: false,
      megakernelTuning: { inflight: 2 },
      megakernelTrace: trace,
    };
    expect(megakernelEngineOptions(options)).toEqual({
      megakernelSteps: 8,
      megakernelScreen: false,
      megakernelTuning: { inflight: 2 },
      megakernelTrace: trace,
    });
    expect(megakernelEngineOptions({})).toEqual({});
  });
});
