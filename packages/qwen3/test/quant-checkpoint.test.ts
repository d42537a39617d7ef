/**
 * The qk quantized checkpoint: `quantizeCheckpoint` writes it, `loadQwen3` loads it without re-quantizing, and the
 * result runs the same logits as quantizing the float checkpoint at load.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QkValueError } from '@qk/ops';
import { afterAll, describe, expect, it } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/index.js';
import { PRESETS } from '../src/config.js';
import { QkCheckpointError } from '../src/errors.js';
import { loadQwen3 } from '../src/model.js';
import { quantizeCheckpoint } from '../src/quant/checkpoint.js';
import { openCheckpoint } from '../src/safetensors/checkpoint.js';

const root = await mkdtemp(join(tmpdir(), 'qk-quant-'));
afterAll(() => rm(root, { recursive: true, force: true }));
const src = join(root, 'bf16');
await writeRandomCheckpoint(src, PRESETS.tiny, { seed: 5 });

describe('quantizeCheckpoint + loadQwen3', () => {
  for (const [bits, group] of [
    [8, undefined],
    [4, 128],
    [4, 64],
  ] as const) {
    it(`int${bits}${group === undefined ? '' : ` group ${group}`}: writes the documented layout and loads it as stored`, async () => {
      const out = join(root, `int${bits}-${group ?? 0}`);
      const progress: number[] = [];
      await quantizeCheckpoint(src, out, {
        bits,
        ...(group === undefined ? {} : { groupSize: group }),
        onProgress: (p) => progress.push(p.written),
      });
      expect(progress.length).toBeGreaterThan(0);
      const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
      expect(config.quantization_config).toEqual({
        quant_method: 'qk',
        bits,
        group_size: group ?? null,
        modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
        format_version: 1,
      });
      const ckpt = await openCheckpoint(out);
      const q = ckpt.tensors.get('model.layers.0.mlp.down_proj.qweight')!;
      const s = ckpt.tensors.get('model.layers.0.mlp.down_proj.scales')!;
      expect(ckpt.tensors.has('model.layers.0.mlp.down_proj.weight')).toBe(false);
      expect(ckpt.tensors.get('model.embed_tokens.weight')!.dtype).toBe('BF16');
      expect(q.dtype).toBe(bits === 8 ? 'I8' : 'U8');
      expect(q.shape).toEqual(bits === 8 ? [128, 384] : [128, 192]);
      expect(s.shape).toEqual(bits === 8 ? [128] : [128, 384 / group!]);
      await ckpt.close();

      const format = bits === 8 ? 'int8' : 'int4';
      const stored = await loadQwen3(out, { engine: 'cpu', maxContext: 16 });
      const atLoad = await loadQwen3(src, {
        engine: 'cpu',
        maxContext: 16,
        weights: format,
        ...(group === undefined ? {} : { groupSize: group }),
      });
      expect(stored.engine).toBe('cpu');
      const prompt = [1, 2, 3, 4000, 5];
      const a = await stored.generate(prompt, { maxTokens: 6, temperature: 0 }).result;
      const b = await atLoad.generate(prompt, { maxTokens: 6, temperature: 0 }).result;
      expect(a.ids).toEqual(b.ids);
      stored.dispose();
      atLoad.dispose();
      await expect(loadQwen3(out, { weights: bits === 8 ? 'int4' : 'int8' })).rejects.toThrow(QkValueError);
      // With a GPU: the megakernel does not serve the tiny shape (use layered); without one the GPU check speaks first.
      await expect(loadQwen3(out, { engine: 'megakernel' })).rejects.toThrow(/megakernel/);
    });
  }

  it('refuses a group size that does not divide the inputs, and re-quantizing', async () => {
    await expect(quantizeCheckpoint(src, join(root, 'bad'), { bits: 4, groupSize: 256 })).rejects.toThrow(
      /group size 256/,
    );
    const out = join(root, 'twice');
    await quantizeCheckpoint(src, out, { bits: 8 });
    await expect(quantizeCheckpoint(out, join(root, 'twice2'), { bits: 4 })).rejects.toThrow(
      QkCheckpointError,
    );
    await expect(quantizeCheckpoint(src, out, { bits: 8 })).rejects.toThrow(/already holds a checkpoint/);
  });
});
