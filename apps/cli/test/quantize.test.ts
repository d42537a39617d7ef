/** `qk model quantize` and `--weights`, called in-process. */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultEngine, PRESETS } from '@qk/qwen3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { UsageError } from '../src/args.js';
import { modelCommand } from '../src/commands/model.js';
import { modelChoice, openModel } from '../src/model-options.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-quantize-cli-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function run(...argv: string[]): Promise<{ code: number; out: string }> {
  const out: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    out.push(args.join(' '));
  });
  vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    return { code: await modelCommand(argv), out: out.join('\n') };
  } finally {
    vi.restoreAllMocks();
  }
}

describe('qk model quality', () => {
  it('measures the projections and the logits of int8 and int4 against the float model, and writes JSON', async () => {
    const src = join(root, 'tiny-quality');
    expect((await run('init', '--preset', 'tiny', '--out', src, '--seed', '3')).code).toBe(0);
    const json = join(root, 'quality.json');
    const r = await run(
      'quality',
      src,
      '--to',
      'int4',
      '--group',
      '64',
      '--steps',
      '6',
      '--engine',
      'cpu',
      '--json',
      json,
    );
    expect(r.code).toBe(0);
    expect(r.out).toContain('INT4 groups of 64 on the cpu engine');
    expect(r.out).toMatch(/\| gate \| \d+\.\d+% \| \d+\.\d+% \|/);
    expect(r.out).toMatch(/logits over 6 teacher-forced steps: KL mean \d\.\d+e[-+]\d+ nats/);
    const report = JSON.parse(await readFile(join(root, 'quality.json'), 'utf8'));
    expect(report).toMatchObject({ engine: 'cpu', bits: 4, groupSize: 64 });
    // Every projection of every layer: 7 per layer, each error a few percent (INT4), none zero or absent.
    expect(report.projections).toHaveLength(7 * PRESETS.tiny.numLayers);
    for (const e of report.projections) expect(e.relError).toBeGreaterThan(0.01);
    for (const e of report.projections) expect(e.relError).toBeLessThan(0.3);
    expect(report.logits.steps).toBe(6);
    expect(report.logits.klMean).toBeGreaterThan(0);
    expect(report.logits.top1).toBeGreaterThanOrEqual(0);
    const int8 = await run('quality', src, '--to', 'int8', '--steps', '4', '--engine', 'cpu');
    expect(int8.code).toBe(0);
    expect(int8.out).toContain('INT8 per channel on the cpu engine');
  });

  it('refuses bad usage and quantized checkpoints', async () => {
    const src = join(root, 'tiny-quality');
    await expect(run('quality', src)).rejects.toThrow(/--to must be int8 or int4/);
    await expect(run('quality', src, '--to', 'int8', '--group', '64')).rejects.toThrow(/--group applies/);
    await expect(run('quality', src, '--to', 'int4', '--steps', '0')).rejects.toThrow(/--steps/);
    await expect(run('quality', src, '--to', 'int4', '--engine', 'gpu')).rejects.toThrow(/--engine/);
    await expect(run('quality', '--to', 'int4')).rejects.toThrow(UsageError);
    const q = join(root, 'tiny-quality-int8');
    expect((await run('quantize', src, '--to', 'int8', '--out', q)).code).toBe(0);
    await expect(run('quality', q, '--to', 'int8', '--engine', 'cpu')).rejects.toThrow(/float checkpoint/);
  });
});

describe('qk model quantize', () => {
  it('writes an int4 checkpoint that --model loads as stored', async () => {
    const src = join(root, 'tiny');
    const out = join(root, 'tiny-int4');
    expect((await run('init', '--preset', 'tiny', '--out', src)).code).toBe(0);
    const r = await run('quantize', src, '--to', 'int4', '--group', '64', '--out', out);
    expect(r.code).toBe(0);
    expect(r.out).toContain('int4 (group 64)');
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
    expect(config.quantization_config).toMatchObject({ quant_method: 'qk', bits: 4, group_size: 64 });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const model = await openModel({ model: out, 'max-context': '16' });
      // Quantized weights run where bf16 ones without a shape for the megakernel would: layered with a GPU, else cpu.
      expect(model.engine).toBe(defaultEngine());
      // One line says what the engine holds, in the format loaded.
      const mib = ((model.weightInfo?.projectionBytes ?? 0) / 2 ** 20).toFixed(1);
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain(
        `weights: int4 decoder projections ${mib} MiB`,
      );
      const result = await model.generate([1, 2, 3], { maxTokens: 3, temperature: 0 }).result;
      expect(result.ids).toHaveLength(3);
      model.dispose();
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('refuses bad usage', async () => {
    await expect(run('quantize', join(root, 'x'), '--to', 'int3', '--out', 'y')).rejects.toThrow(UsageError);
    await expect(run('quantize', join(root, 'x'), '--to', 'int8')).rejects.toThrow(/--out/);
    await expect(
      run('quantize', join(root, 'x'), '--to', 'int8', '--group', '64', '--out', 'y'),
    ).rejects.toThrow(/int4 only/);
  });
});

describe('--weights', () => {
  it('picks the preset of the default engine (tiny on cpu); the megakernel takes quantized weights too', () => {
    expect(modelChoice({ weights: 'int8' })).toEqual({
      source: defaultEngine() === 'cpu' ? 'tiny' : '0.6b',
      weights: 'int8',
    });
    expect(modelChoice({ weights: 'int4', engine: 'layered' })).toEqual({
      source: '0.6b',
      engine: 'layered',
      weights: 'int4',
    });
    expect(modelChoice({ weights: 'int4', engine: 'megakernel' })).toEqual({
      source: '0.6b',
      engine: 'megakernel',
      weights: 'int4',
    });
    expect(() => modelChoice({ weights: 'fp8' })).toThrow(UsageError);
    expect(modelChoice({ preset: 'tiny', 'prefill-chunk': '512' })).toMatchObject({ prefillChunk: 512 });
    for (const bad of ['0', '', '-4', '1e3']) {
      expect(() => modelChoice({ preset: 'tiny', 'prefill-chunk': bad })).toThrow(UsageError);
    }
  });
});
