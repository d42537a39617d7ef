/**
 * The megakernel trace's stamps are `%globaltimer` nanoseconds (about 1.8e18): `traceStampsNs` must keep every
 * nanosecond of their differences, which doubles of the stamps themselves (multiples of 256 there) lose.
 */
import { describe, expect, it } from 'vitest';
import { traceStampsNs } from '../src/engine/megakernel/trace.js';

describe('traceStampsNs', () => {
  it('keeps single nanoseconds between stamps of about 1.8e18', () => {
    const t0 = 1_800_000_000_000_000_000n;
    const stamps = new BigUint64Array([t0 + 1n, 0n, t0, t0 + 257n, t0 + 1_000_000_003n]);
    const ns = traceStampsNs(stamps);
    expect(Array.from(ns)).toEqual([1, Number.NaN, 0, 257, 1_000_000_003]);
    // (What the reader did before: the doubles of t0 + 1 and t0 are one and the same number.)
    expect(Number(t0 + 1n) - Number(t0)).toBe(0);
  });

  it('measures from the earliest stamp wherever it lies, and gives NaN for an empty trace', () => {
    const t0 = 1_799_999_999_999_999_999n;
    const ns = traceStampsNs(new BigUint64Array([t0 + 40n, t0 + 7n, t0 + 9n]));
    expect(Array.from(ns)).toEqual([33, 0, 2]);
    expect(Array.from(traceStampsNs(new BigUint64Array([0n, 0n])))).toEqual([Number.NaN, Number.NaN]);
  });
});
