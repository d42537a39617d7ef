/**
 * Out of GPU memory while loading (issue #51), with the memory check skipped: loadQwen3 turns @qk/ops' generic
 * `QkOutOfMemoryError` into `QkMemoryError` saying what was asked, what was free and what to do, and frees what it
 * uploaded. No GPU needed: the failing allocation is injected into the weight loader and the engine factory, which
 * loadQwen3 calls with the `tiny` preset on the cpu engine.
 */
import { QkOutOfMemoryError, QkValueError, type Tensor } from '@qk/ops';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { QkMemoryError } from '../src/errors.js';
import { loadQwen3 } from '../src/model.js';
import type { Qwen3Weights } from '../src/types.js';

const GIB = 1024 ** 3;

/** The faults to inject: thrown by the weight loader, or by the engine factory once it holds the weights. */
const fault = vi.hoisted(() => ({
  upload: null as Error | null,
  engine: null as Error | null,
  weights: undefined as Qwen3Weights | undefined,
}));

vi.mock('../src/checkpoint/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/checkpoint/index.js')>();
  return {
    ...real,
    randomWeights: (...args: Parameters<typeof real.randomWeights>) => {
      if (fault.upload !== null) return Promise.reject(fault.upload);
      return real.randomWeights(...args);
    },
  };
});

vi.mock('../src/engine/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/engine/index.js')>();
  return {
    ...real,
    createEngine: (...args: Parameters<typeof real.createEngine>) => {
      if (fault.engine === null) return real.createEngine(...args);
      fault.weights = args[2];
      throw fault.engine;
    },
  };
});

afterEach(() => {
  fault.upload = null;
  fault.engine = null;
  fault.weights = undefined;
});

const load = () => loadQwen3('tiny', { engine: 'cpu', checkMemory: false, maxContext: 64 });

function allTensors(weights: Qwen3Weights): Tensor[] {
  return [weights.embed, weights.norm, weights.lmHead, ...weights.layers.flatMap((l) => Object.values(l))];
}

describe('loadQwen3: out of GPU memory while loading', () => {
  it('an upload that runs out becomes QkMemoryError with the numbers, the sentence and what to do', async () => {
    fault.upload = new QkOutOfMemoryError('malloc', 3 * GIB, 0.5 * GIB, 80 * GIB);
    const e = await load().catch((err: unknown) => err);
    expect(e).toBeInstanceOf(QkMemoryError);
    const m = e as QkMemoryError;
    expect(m.code).toBe('QK_OOM');
    expect([m.neededBytes, m.freeBytes, m.totalBytes]).toEqual([3 * GIB, 0.5 * GIB, 80 * GIB]);
    expect(m.message).toBe(
      'loadQwen3: loading the weights ran out of GPU memory: it asked for 3.0 GiB with 512.0 MiB free of 80 GiB; use a smaller model, or int8/int4 weights (--weights int8 or int4), or free the GPU memory other processes or models hold.',
    );
  });

  it('running out once the weights are loaded frees them all, and the next load works', async () => {
    fault.engine = new QkOutOfMemoryError('malloc', GIB, GIB / 4, 24 * GIB);
    await expect(load()).rejects.toBeInstanceOf(QkMemoryError);
    const weights = fault.weights!;
    expect(weights).toBeDefined();
    expect(allTensors(weights).every((t) => t.disposed)).toBe(true);
    fault.engine = null;
    const model = await load();
    expect((await model.generate([1, 2, 3], { temperature: 0, maxTokens: 2 }).result).ids.length).toBe(2);
    model.dispose();
  });

  it('other errors, and the engine’s own memory error, pass through unchanged', async () => {
    for (const error of [
      new QkValueError('createEngine', 'engine', 'is wrong.'),
      new QkMemoryError('layeredEngine', 'the layered engine ran out of GPU memory.', 1, 0, 2),
    ]) {
      fault.engine = error;
      await expect(load()).rejects.toBe(error);
    }
  });
});
