/**
 * AWQ (GEMM) and GPTQ 4-bit layouts, written here to each format's spec from random codes, zero points and f16
 * scales, then repacked at load into the @qk/ops INT4 layout plus per-group offsets. The loaded linear must equal
 * the float dequantization `(q − z) · s` of the same values.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, f16BitsToF32, f32ToF16Bits, linear, Tensor, useCudaBackend } from '@qk/ops';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWeights, writeRandomCheckpoint } from '../src/checkpoint/index.js';
import { PRESETS } from '../src/config.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { QkCheckpointError } from '../src/errors.js';
import { loadQwen3 } from '../src/model.js';
import { type ExternalMethod, repackInt4 } from '../src/quant/external.js';
import { LINEAR_KEYS, linearName, quantLinear } from '../src/quant/quantize.js';
import { openCheckpoint } from '../src/safetensors/checkpoint.js';
import { type WritableTensor, writeShardedSafetensors } from '../src/safetensors/writer.js';
import type { LayerWeights } from '../src/types.js';

useCudaBackend(cudaCore);

const AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7];

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random codes/zeros/scales of an `[out, in]` projection, its packed form per `method`, and the float weight. */
function makePacked(method: ExternalMethod, out: number, n: number, g: number, seed: number) {
  const r = rng(seed);
  const groups = n / g;
  const q = Int32Array.from({ length: n * out }, () => Math.floor(r() * 16)); // [in, out]
  // GPTQ v1 stores z − 1 in four bits, so z = 0 cannot be stored (AutoGPTQ's zero points are 1…15 in practice).
  const zMin = method === 'gptq' ? 1 : 0;
  const z = Int32Array.from({ length: groups * out }, () => zMin + Math.floor(r() * (16 - zMin))); // [groups, out]
  const sBits = Uint16Array.from({ length: groups * out }, () => f32ToF16Bits(0.002 + r() * 0.02));
  const s = Float32Array.from(sBits, (b) => f16BitsToF32(b));
  const dense = new Float32Array(out * n); // [out, in]
  for (let k = 0; k < n; k++)
    for (let o = 0; o < out; o++) {
      const gi = Math.floor(k / g);
      dense[o * n + k] = (q[k * out + o]! - z[gi * out + o]!) * s[gi * out + o]!;
    }
  const o8 = out / 8;
  let qweight: Int32Array;
  const qzeros = new Int32Array(groups * o8);
  if (method === 'awq') {
    qweight = new Int32Array(n * o8);
    for (let k = 0; k < n; k++)
      for (let c = 0; c < o8; c++)
        for (let i = 0; i < 8; i++) qweight[k * o8 + c]! |= q[k * out + c * 8 + AWQ_ORDER[i]!]! << (4 * i);
    for (let gi = 0; gi < groups; gi++)
      for (let c = 0; c < o8; c++)
        for (let i = 0; i < 8; i++) qzeros[gi * o8 + c]! |= z[gi * out + c * 8 + AWQ_ORDER[i]!]! << (4 * i);
  } else {
    qweight = new Int32Array((n / 8) * out);
    for (let k = 0; k < n; k++)
      for (let o = 0; o < out; o++) qweight[(k >> 3) * out + o]! |= q[k * out + o]! << (4 * (k & 7));
    for (let gi = 0; gi < groups; gi++)
      for (let o = 0; o < out; o++)
        qzeros[gi * o8 + (o >> 3)]! |= ((z[gi * out + o]! - 1) & 0xf) << (4 * (o & 7));
  }
  const gIdx = Int32Array.from({ length: n }, (_, k) => Math.floor(k / g));
  return { qweight, qzeros, sBits, s, gIdx, dense };
}

function relError(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

describe('repackInt4', () => {
  for (const method of ['awq', 'gptq'] as const) {
    for (const [out, n, g] of [
      [40, 192, 64],
      [24, 256, 128],
      [72, 384, 128],
    ] as const) {
      it(`${method} [${out}, ${n}] group ${g}: linear equals the float dequantization`, () => {
        const p = makePacked(method, out, n, g, out * n + g);
        const dense = p.dense;
        const packed = {
          qweight: p.qweight,
          qzeros: p.qzeros,
          scales: p.s,
          ...(method === 'gptq' ? { gIdx: p.gIdx } : {}),
        };
        const r = repackInt4(method, packed, out, n, g, 'w');
        const x = Tensor.fromStorage(
          Float32Array.from({ length: 3 * n }, (_, i) => Math.sin(i * 1.7) + 0.3),
          [3, n],
          'f32',
        );
        const got = quantLinear(x, {
          bits: 4,
          weight: { qweight: r.qweight, scales: r.scales, groupSize: g },
          offsets: r.offsets,
        });
        const want = linear(x, Tensor.fromStorage(dense, [out, n], 'f32'));
        expect(relError(got.data, want.data)).toBeLessThan(1e-5);
      });
    }
  }

  it('refuses act-order (non-sequential g_idx)', () => {
    const p = makePacked('gptq', 16, 128, 64, 1);
    const gIdx = p.gIdx.slice().reverse();
    expect(() =>
      repackInt4('gptq', { qweight: p.qweight, qzeros: p.qzeros, scales: p.s, gIdx }, 16, 128, 64, 'w'),
    ).toThrow(/act-order/);
  });
});

describe('AWQ and GPTQ checkpoints through loadQwen3', () => {
  const tiny = PRESETS.tiny;
  let root: string;
  afterAll(() => rm(root, { recursive: true, force: true }));

  for (const [method, g] of [
    ['awq', 128],
    ['gptq', 64],
  ] as const) {
    it(`${method} group ${g}: logits equal a float model of the dequantized projections`, async () => {
      root ??= await mkdtemp(join(tmpdir(), 'qk-ext-'));
      const src = join(root, `src-${method}`);
      const dir = join(root, method);
      await writeRandomCheckpoint(src, tiny, { seed: 9, tokenizerDir: false });
      const ckpt = await openCheckpoint(src);
      const dense = new Map<string, Float32Array>();
      const tensors: WritableTensor[] = [];
      let seed = 100;
      for (const [name, info] of ckpt.tensors) {
        const layer = /^model\.layers\.(\d+)\./.exec(name);
        const key = LINEAR_KEYS.find((k) => layer !== null && name === linearName(Number(layer[1]), k));
        if (key === undefined) {
          tensors.push({
            name,
            dtype: info.dtype,
            shape: info.shape,
            bytes: (await ckpt.readTensor(name)).bytes,
          });
          continue;
        }
        const [out, n] = info.shape as [number, number];
        const p = makePacked(method, out, n, g, seed++);
        dense.set(name, p.dense);
        const base = name.slice(0, -'.weight'.length);
        const bytes = (a: Int32Array | Uint16Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
        tensors.push({
          name: `${base}.qweight`,
          dtype: 'I32',
          shape: method === 'awq' ? [n, out / 8] : [n / 8, out],
          bytes: bytes(p.qweight),
        });
        tensors.push({
          name: `${base}.qzeros`,
          dtype: 'I32',
          shape: [n / g, out / 8],
          bytes: bytes(p.qzeros),
        });
        tensors.push({ name: `${base}.scales`, dtype: 'F16', shape: [n / g, out], bytes: bytes(p.sBits) });
        if (method === 'gptq')
          tensors.push({ name: `${base}.g_idx`, dtype: 'I32', shape: [n], bytes: bytes(p.gIdx) });
      }
      await ckpt.close();
      await writeShardedSafetensors(dir, tensors);
      const config = JSON.parse(await readFile(join(src, 'config.json'), 'utf8'));
      config.quantization_config =
        method === 'awq'
          ? { quant_method: 'awq', bits: 4, group_size: g, zero_point: true, version: 'gemm' }
          : { quant_method: 'gptq', bits: 4, group_size: g, desc_act: false, sym: false };
      await writeFile(join(dir, 'config.json'), JSON.stringify(config));

      const model = await loadQwen3(dir, { engine: 'cpu', maxContext: 16 });
      expect(model.engine).toBe('cpu');
      // The reference: the source's float tensors, with each projection the float dequantization `(q − z) · s`.
      const float = await loadWeights(src, tiny, { dtype: 'f32' });
      const layers = float.layers.map((l, i) => {
        const o: Record<string, Tensor<'f32'>> = { ...l };
        for (const k of LINEAR_KEYS)
          o[k] = Tensor.fromStorage(dense.get(linearName(i, k))!, l[k].shape, 'f32');
        return o as unknown as LayerWeights<'f32'>;
      });
      const reference = createCpuEngine(tiny, { ...float, layers }, { maxContext: 16 });
      const prompt = [3, 14, 159, 2653, 5];
      const got = (await model.generate(prompt, { maxTokens: 4, temperature: 0 }).result).ids;
      const want: number[] = [];
      let ids = prompt;
      let start = 0;
      for (let t = 0; t < 4; t++) {
        const logits = reference.logits(ids, start);
        start += ids.length;
        let best = 0;
        for (let i = 1; i < 151_669; i++) if (logits[i]! > logits[best]!) best = i;
        want.push(best);
        ids = [best];
      }
      expect(got).toEqual(want);
      model.dispose();
      if (cudaAvailable()) {
        // The layered engine keeps the codes and zero-point offsets on the GPU; in f32 it picks the same tokens.
        const onGpu = await loadQwen3(dir, { engine: 'layered', dtype: 'f32', maxContext: 16 });
        expect(onGpu.weightInfo?.format).toBe('int4');
        expect((await onGpu.generate(prompt, { maxTokens: 4, temperature: 0 }).result).ids).toEqual(want);
        onGpu.dispose();
      }
      reference.dispose();
    });
  }

  it('refuses an unsupported quantization config with the method named', async () => {
    root ??= await mkdtemp(join(tmpdir(), 'qk-ext-'));
    const dir = join(root, 'bnb');
    await writeRandomCheckpoint(dir, tiny, { seed: 1, tokenizerDir: false });
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    config.quantization_config = { quant_method: 'bitsandbytes' };
    await writeFile(join(dir, 'config.json'), JSON.stringify(config));
    await expect(loadQwen3(dir)).rejects.toThrow(QkCheckpointError);
    await expect(loadQwen3(dir)).rejects.toThrow(/bitsandbytes/);
  });
});
