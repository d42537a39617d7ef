/**
 * `--megakernel-tuning JSON|FILE` without a GPU: inline and file JSON become the loadQwen3 options they stand for,
 * and every mistake is one usage error that names the field.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MEGAKERNEL_TUNING_FIELDS } from '@qk/qwen3';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/args.js';
import { MEGAKERNEL_TUNING_HELP, megakernelFlag } from '../src/megakernel-flag.js';
import { MODEL_HELP, MODEL_OPTIONS } from '../src/model-options.js';

describe('--megakernel-tuning', () => {
  it('is a model flag, and its help lists every kernel field', () => {
    expect(MODEL_OPTIONS['megakernel-tuning']).toEqual({ type: 'string' });
    expect(MODEL_HELP).toContain('--megakernel-tuning JSON|FILE');
    for (const name of Object.keys(MEGAKERNEL_TUNING_FIELDS)) expect(MEGAKERNEL_TUNING_HELP).toContain(name);
  });

  it('absent: no options', () => {
    expect(megakernelFlag(undefined)).toEqual({});
  });

  it('splits inline JSON into the kernel tuning and the engine options', () => {
    const got = megakernelFlag('{"inflight":2,"stagedUntil":0,"steps":8,"until":100000,"screen":false}');
    expect(got).toEqual({
      megakernelTuning: { inflight: 2, stagedUntil: 0 },
      megakernelSteps: 8,
      megakernelUntil: 100000,
      megakernelScreen: false,
    });
    expect(Object.isFrozen(got.megakernelTuning)).toBe(true);
    expect(megakernelFlag(' {}')).toEqual({ megakernelTuning: {} });
  });

  it('reads a file, and its trace field writes the summary there', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-mk-flag-'));
    const file = join(dir, 'tuning.json');
    const traceFile = join(dir, 'trace.json');
    writeFileSync(file, JSON.stringify({ claimTiles: true, trace: traceFile }));
    const got = megakernelFlag(file);
    expect(got.megakernelTuning).toEqual({ claimTiles: true });
    got.megakernelTrace!({ steps: 3, stages: [], stepUs: 500 });
    expect(JSON.parse(readFileSync(traceFile, 'utf8'))).toEqual({ steps: 3, stages: [], stepUs: 500 });
  });

  it('refuses what is not a JSON object, or a file it cannot read', () => {
    expect(() => megakernelFlag('{inflight: 2}')).toThrow(/--megakernel-tuning is not valid JSON/);
    expect(() => megakernelFlag('/nonexistent/tuning.json')).toThrow(
      /takes a JSON object or a file holding one; cannot read "\/nonexistent\/tuning\.json"/,
    );
    const dir = mkdtempSync(join(tmpdir(), 'qk-mk-flag-'));
    writeFileSync(join(dir, 'list.json'), '[1, 2]');
    expect(() => megakernelFlag(join(dir, 'list.json'))).toThrow(/must be a JSON object/);
  });

  it('names the field at fault: unknown, of the wrong type, out of range', () => {
    const cases: [string, RegExp][] = [
      [
        '{"slotKB":20}',
        /"slotKB" is not a megakernel tuning field; the fields are slotKb, .*; the engine's fields are steps, until, screen, trace$/,
      ],
      ['{"inflight":2000}', /"inflight" must be an integer in \[0, 1024\], got 2000$/],
      ['{"claimTiles":1}', /"claimTiles" must be a boolean, got 1$/],
      ['{"debug":16}', /"debug" must be a non-negative integer made of the bits in 111, got 16$/],
      ['{"steps":65}', /"steps" must be an integer in \[1, 64\], got 65$/],
      ['{"until":-1}', /"until" must be an integer ≥ 0/],
      ['{"screen":"no"}', /"screen" must be true or false, got "no"$/],
      ['{"trace":""}', /"trace" must be a file name/],
    ];
    for (const [text, why] of cases) {
      let caught: unknown;
      try {
        megakernelFlag(text);
      } catch (e) {
        caught = e;
      }
      expect(caught, text).toBeInstanceOf(UsageError);
      expect((caught as Error).message, text).toMatch(/^--megakernel-tuning: /);
      expect((caught as Error).message, text).toMatch(why);
    }
  });
});
