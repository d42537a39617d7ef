/**
 * The megakernel's tuning object without a GPU: `checkMegakernelTuning` refuses unknown fields, wrong types and
 * out-of-range values with a `QkValueError` naming the field, and the megakernel's addon contract check refuses an
 * addon whose table of fields differs from the one @qk/qwen3 checks with.
 */
import type { Binding } from '@qk/cuda-core';
import { QkValueError } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { bindingMismatch, MEGAKERNEL_LIMITS } from '../src/engine/megakernel/addon.js';
import { checkMegakernelTuning, MEGAKERNEL_TUNING_FIELDS } from '../src/engine/megakernel/tuning.js';

/** The QkValueError `fn` throws (or a failure). */
function valueError(fn: () => unknown): QkValueError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(QkValueError);
    return e as QkValueError;
  }
  throw new Error('expected a QkValueError');
}

describe('checkMegakernelTuning', () => {
  it('returns a frozen copy of the fields given, without the undefined ones; undefined is every default', () => {
    const given = { inflight: 2, claimTiles: true, stagedUntil: 0, debug: 64 | 1, slotKb: undefined };
    const got = checkMegakernelTuning('op', given);
    expect(got).toEqual({ inflight: 2, claimTiles: true, stagedUntil: 0, debug: 65 });
    expect(Object.isFrozen(got)).toBe(true);
    expect(got).not.toBe(given);
    expect(checkMegakernelTuning('op', undefined)).toEqual({});
    expect(checkMegakernelTuning('op', {})).toEqual({});
  });

  it('takes every field at both ends of its range', () => {
    for (const [name, spec] of Object.entries(MEGAKERNEL_TUNING_FIELDS)) {
      const values =
        spec.kind === 'boolean'
          ? [false, true]
          : spec.kind === 'integer'
            ? [spec.min, spec.max]
            : [0, spec.mask];
      for (const v of values) expect(checkMegakernelTuning('op', { [name]: v }), name).toEqual({ [name]: v });
    }
  });

  it('refuses an unknown field, naming it and listing the known ones', () => {
    const e = valueError(() => checkMegakernelTuning('loadQwen3', { inflight: 1, slotKB: 20 }));
    expect(e.arg).toBe('megakernelTuning.slotKB');
    expect(e.message).toMatch(
      /^loadQwen3: argument "megakernelTuning\.slotKB" is not a megakernel tuning field/,
    );
    expect(e.message).toContain('slotKb, inflight, lmInflight');
    expect(e.message).toContain('timeoutMs');
  });

  it('refuses values of the wrong type, naming the field and what it takes', () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ inflight: '2' }, 'inflight', /must be an integer in \[0, 1024\], got "2"/],
      [{ inflight: 1.5 }, 'inflight', /must be an integer in \[0, 1024\], got 1\.5/],
      [{ chunkKeys: Number.NaN }, 'chunkKeys', /got NaN/],
      [{ stagedFrom: Number.POSITIVE_INFINITY }, 'stagedFrom', /got Infinity/],
      [{ claimTiles: 1 }, 'claimTiles', /must be a boolean, got 1/],
      [{ l2Stream: 'false' }, 'l2Stream', /must be a boolean, got "false"/],
      [{ kvStage: null }, 'kvStage', /must be a boolean, got null/],
      [{ debug: true }, 'debug', /must be a non-negative integer made of the bits in 111/],
      [{ timeoutMs: { ms: 5 } }, 'timeoutMs', /got an object/],
    ];
    for (const [tuning, field, why] of cases) {
      const e = valueError(() => checkMegakernelTuning('op', tuning));
      expect(e.arg, field).toBe(`megakernelTuning.${field}`);
      expect(e.message, field).toMatch(why);
    }
  });

  it('refuses values out of range, naming the field and its range', () => {
    const cases: [Record<string, number>, string, string][] = [
      [{ slotKb: 228 }, 'slotKb', '[0, 227], got 228'],
      [{ inflight: -1 }, 'inflight', '[0, 1024], got -1'],
      [{ lmInflight: 1025 }, 'lmInflight', '[0, 1024], got 1025'],
      [{ skipItems: 4097 }, 'skipItems', '[0, 4096]'],
      [{ chunkKeys: 2 ** 20 + 1 }, 'chunkKeys', '[0, 1048576]'],
      [{ oMerge: 4 }, 'oMerge', '[0, 3], got 4'],
      [{ stagedUntil: 385 }, 'stagedUntil', '[0, 384], got 385'],
      [{ stagedFrom: 2 ** 31 }, 'stagedFrom', '[0, 2147483647]'],
      [{ stagedHf: 3 }, 'stagedHf', '[0, 2], got 3'],
      [{ timeoutMs: 0 }, 'timeoutMs', '[1, 86400000], got 0'],
      [{ debug: 16 }, 'debug', 'bits in 111, got 16'],
      [{ debug: -1 }, 'debug', 'bits in 111, got -1'],
    ];
    for (const [tuning, field, range] of cases) {
      const e = valueError(() => checkMegakernelTuning('op', tuning));
      expect(e.arg, field).toBe(`megakernelTuning.${field}`);
      expect(e.message, field).toContain(range);
    }
  });

  it('refuses anything but a plain object, under the name the caller gives it', () => {
    for (const bad of [null, 5, 'inflight=2', [1, 2], true]) {
      const e = valueError(() => checkMegakernelTuning('Qwen3Megakernel', bad, 'spec.tuning'));
      expect(e.arg).toBe('spec.tuning');
      expect(e.message).toMatch(/must be an object of megakernel tuning fields/);
    }
    expect(valueError(() => checkMegakernelTuning('op', { bogus: 1 }, 'spec.tuning')).arg).toBe(
      'spec.tuning.bogus',
    );
  });
});

describe('the addon contract for the tuning fields', () => {
  const addon = (fields: unknown, mask: unknown = () => {}, history: unknown = () => {}) =>
    ({
      megakernelLimits: MEGAKERNEL_LIMITS,
      megakernelTuningFields: fields,
      megakernelMask: mask,
      megakernelCancel: mask,
      megakernelHistory: history,
    }) as unknown as Binding;

  it('accepts an addon whose table is the one @qk/qwen3 checks with', () => {
    expect(bindingMismatch(addon(structuredClone(MEGAKERNEL_TUNING_FIELDS)))).toBeUndefined();
  });

  it('refuses an addon built before the tuning object, with the rebuild command', () => {
    expect(bindingMismatch(addon(undefined))).toMatch(
      /exports no megakernelTuningFields .*pnpm --filter @qk\/cuda-core build:native/,
    );
  });

  it('refuses an addon built before masked launches, with the rebuild command', () => {
    expect(bindingMismatch(addon(structuredClone(MEGAKERNEL_TUNING_FIELDS), null))).toMatch(
      /has no megakernelMask .*pnpm --filter @qk\/cuda-core build:native/,
    );
  });

  it('refuses an addon built before penalties in the kernel, with the rebuild command', () => {
    expect(bindingMismatch(addon(structuredClone(MEGAKERNEL_TUNING_FIELDS), () => {}, null))).toMatch(
      /megakernelHistory .*pnpm --filter @qk\/cuda-core build:native/,
    );
  });

  it('names every field whose kind or range differs, or that only one side knows', () => {
    const theirs: Record<string, unknown> = structuredClone(MEGAKERNEL_TUNING_FIELDS);
    theirs.inflight = { kind: 'integer', min: 0, max: 8 };
    theirs.claimTiles = { kind: 'integer', min: 0, max: 1 };
    delete theirs.timeoutMs;
    theirs.prefetchLm = { kind: 'boolean' };
    const why = bindingMismatch(addon(theirs));
    expect(why).toContain(
      'inflight: an integer in [0, 8] in the addon, an integer in [0, 1024] in @qk/qwen3',
    );
    expect(why).toContain('claimTiles: an integer in [0, 1] in the addon, boolean in @qk/qwen3');
    expect(why).toContain('timeoutMs: absent in the addon');
    expect(why).toContain('prefetchLm: boolean in the addon, absent in @qk/qwen3');
    expect(why).not.toContain('slotKb');
  });
});
