/** The serving bar's comparison: each prompt length's served requests against the lone generations of that length. */
import { describe, expect, it } from 'vitest';
import { type RequestRecord, variantComparison } from '../src/index.js';

function record(
  client: number,
  variant: number,
  decodeTokPerS: number | undefined,
  failed = false,
): RequestRecord {
  return {
    client,
    key: `${client}/${variant}`,
    outcome: { errors: failed ? [{ kind: 'http', message: 'status 500' }] : [], text: 'x' },
    ...(decodeTokPerS === undefined ? {} : { decodeTokPerS }),
    latencyMs: 10,
    endedAt: 0,
  } as RequestRecord;
}

describe('variantComparison', () => {
  it('compares each prompt length with itself, where a median over the mixed requests would not', () => {
    // Short prompts decode at ~2200 tok/s, long ones at ~1700, lone and served alike: nothing is lost by serving.
    const lone = [
      [2210, 2200, 2190],
      [1710, 1700, 1690],
    ];
    const records = [
      ...[2205, 2195, 2200].map((x, i) => record(i, 0, x)),
      // More long requests finish than short ones: the mixed median lands on the long prompts' speed.
      ...[1705, 1695, 1700, 1702, 1698].map((x, i) => record(i, 1, x)),
    ];
    const got = variantComparison([32, 1024], [45, 1400], lone, records, undefined);
    expect(got.map((c) => [c.words, c.lone.median, c.served?.median])).toEqual([
      [32, 2200, 2200],
      [1024, 1700, 1700],
    ]);
    for (const c of got) expect(c.served!.median / c.lone.median).toBeCloseTo(1, 9);
    // The mixture's median (1702) over the lone mixture's (1950) would have read 0.87×.
    const all = [...records.map((r) => r.decodeTokPerS!)].sort((a, b) => a - b);
    expect(all[Math.floor(all.length / 2)]! / 1950).toBeLessThan(0.9);
  });

  it('leaves out failed requests and those without a decode speed, and lengths never served', () => {
    const got = variantComparison(
      [8, 64, 512],
      [20, 80, 600],
      [[100], [90], [80]],
      [record(0, 0, 50), record(1, 0, 999, true), record(2, 0, undefined), record(0, 1, 45)],
      undefined,
    );
    expect(got[0]!.served!.samples).toBe(1);
    expect(got[0]!.served!.median).toBe(50);
    expect(got[1]!.served!.median).toBe(45);
    expect(got[2]!.served).toBeUndefined();
  });

  it('files engine stats under the length whose prompt is nearest in tokens', () => {
    const stats = [
      {
        decodeTokensPerSecond: 10,
        promptTokens: 22,
        timeToFirstTokenMs: 1,
        prefillMs: 1,
        cachedPromptTokens: 0,
      },
      {
        decodeTokensPerSecond: 20,
        promptTokens: 590,
        timeToFirstTokenMs: 1,
        prefillMs: 1,
        cachedPromptTokens: 0,
      },
      {
        decodeTokensPerSecond: 30,
        promptTokens: 615,
        timeToFirstTokenMs: 1,
        prefillMs: 1,
        cachedPromptTokens: 0,
      },
      {
        decodeTokensPerSecond: 25,
        promptTokens: 601,
        timeToFirstTokenMs: 1,
        prefillMs: 1,
        cachedPromptTokens: 0,
      },
      // No prompt count: not filed.
      { decodeTokensPerSecond: 40, timeToFirstTokenMs: 1, prefillMs: 1, cachedPromptTokens: 0 },
    ];
    const got = variantComparison([8, 512], [20, 600], [[1], [1]], [], stats);
    expect(got[0]!.engine!.median).toBe(10);
    expect(got[1]!.engine!.samples).toBe(3);
    expect(got[1]!.engine!.median).toBe(25);
  });
});
