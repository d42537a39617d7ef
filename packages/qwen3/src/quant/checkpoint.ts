/**
 * The qk quantized checkpoint format: a Hugging Face Qwen3 directory whose decoder projections are stored quantized.
 *
 * - `config.json` is the source's, plus `"quantization_config": { "quant_method": "qk", "bits": 8 | 4,
 *   "group_size": 128 | 64 | null, "modules": ["q_proj", …, "down_proj"], "format_version": 1 }`.
 * - Each projection `model.layers.L.(self_attn|mlp).X_proj.weight` is replaced by two tensors:
 *   `….X_proj.qweight` — INT8: `I8 [out, in]`; INT4: `U8 [out, in/2]`, two values per byte, low nibble first, each
 *   stored as `q + 8` (the `@qk/ops` `Int4Weight` packing) — and `….X_proj.scales` — `F32 [out]` (INT8, per output
 *   channel) or `F32 [out, in/group_size]` (INT4). `w ≈ q · scale`, symmetric: no zero points.
 * - Embedding, LM head and norms are copied unchanged in their dtype.
 */
import { copyFile, mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Device, type FloatDType, Tensor } from '@qk/ops';
import { convertBytes } from '../checkpoint/convert.js';
import { readCheckpointConfig, TOKENIZER_FILES } from '../checkpoint/files.js';
import { assembleWeights, expectedTensors } from '../checkpoint/layout.js';
import { assertCheckpointMatches, firstNonFinite, type LoadProgress } from '../checkpoint/load.js';
import { QkAbortError, QkCheckpointError } from '../errors.js';
import { openCheckpoint } from '../safetensors/checkpoint.js';
import { floatDTypeOf } from '../safetensors/format.js';
import { type WritableTensor, writeShardedSafetensors } from '../safetensors/writer.js';
import type { Qwen3Config, Qwen3Weights } from '../types.js';
import { LIMITS, readUntrustedJson } from '../untrusted.js';
import { type ExternalMethod, repackInt4 } from './external.js';
import {
  disposeQuantizedLayers,
  LINEAR_KEYS,
  type LinearKey,
  linearName,
  placed,
  type QuantizedLayer,
  type QuantizedLinear,
  quantizedOn,
  quantizeLinear,
} from './quantize.js';

/** `quantization_config` of a qk quantized checkpoint. */
export interface QkQuantizationConfig {
  readonly quant_method: 'qk';
  readonly bits: 8 | 4;
  /** INT4 group size; `null` for INT8 (per output channel). */
  readonly group_size: number | null;
  readonly modules: readonly string[];
  readonly format_version: 1;
}

const MODULES = LINEAR_KEYS.map((k) => `${k}_proj`);

/** `quantization_config` of a published AWQ (GEMM) or GPTQ checkpoint, as far as qk reads it. */
export interface ExternalQuantizationConfig {
  readonly quant_method: ExternalMethod;
  readonly bits: 4;
  readonly group_size: number;
  /** Added to GPTQ's stored zero points (1 for the v1 checkpoint format, 0 for v2); 0 for AWQ. */
  readonly zero_offset: number;
}

/** Any quantization config qk loads. */
export type StoredQuantization = QkQuantizationConfig | ExternalQuantizationConfig;

/** Options of {@link quantizeCheckpoint}. */
export interface QuantizeCheckpointOptions {
  readonly bits: 8 | 4;
  /** INT4 group size (default 128). */
  readonly groupSize?: number;
  /** Reported after each tensor written. */
  readonly onProgress?: (progress: { written: number; total: number; tensor: string }) => void;
  readonly signal?: AbortSignal;
}

function baseName(layer: number, key: LinearKey): string {
  return linearName(layer, key).slice(0, -'.weight'.length);
}

/**
 * Reads the float checkpoint in `srcDir` and writes its quantized form to `outDir` (created; it must not hold a
 * config.json yet). Tokenizer and generation files are copied.
 *
 * @throws QkCheckpointError for a source that does not match its config, an already quantized source, a shape the
 *   group size does not divide, or an `outDir` that already holds a checkpoint; QkQuantizationError naming a tensor
 *   that holds non-finite values.
 */
export async function quantizeCheckpoint(
  srcDir: string,
  outDir: string,
  options: QuantizeCheckpointOptions,
): Promise<{ config: QkQuantizationConfig; files: readonly string[] }> {
  const { bits, groupSize = 128 } = options;
  const rawConfig = (await readUntrustedJson(
    join(srcDir, 'config.json'),
    LIMITS.configBytes,
    (reason) => new QkCheckpointError(`${reason}.`, join(srcDir, 'config.json')),
  )) as Record<string, unknown> | undefined;
  if (rawConfig !== undefined && rawConfig.quantization_config !== undefined) {
    throw new QkCheckpointError(
      'is already quantized (its config.json has a quantization_config); quantize the bf16/f16/f32 checkpoint instead.',
      srcDir,
    );
  }
  const config = await readCheckpointConfig(srcDir);
  const existing = await readdir(outDir).catch(() => [] as string[]);
  if (existing.includes('config.json')) {
    throw new QkCheckpointError(
      'already holds a checkpoint (config.json); choose an empty --out directory.',
      outDir,
    );
  }
  const checkpoint = await openCheckpoint(srcDir);
  try {
    assertCheckpointMatches(checkpoint, config);
    const linear = new Map<string, [number, LinearKey]>();
    for (let i = 0; i < config.numLayers; i++)
      for (const k of LINEAR_KEYS) linear.set(linearName(i, k), [i, k]);
    const tensors: WritableTensor[] = [];
    for (const { name, shape } of expectedTensors(config)) {
      const at = linear.get(name);
      if (at === undefined) {
        const info = checkpoint.tensors.get(name)!;
        tensors.push({
          name,
          dtype: info.dtype,
          shape,
          bytes: async () => (await checkpoint.readTensor(name)).bytes,
        });
        continue;
      }
      const [out, inFeatures] = shape as [number, number];
      if (bits === 4 && (inFeatures % groupSize !== 0 || groupSize % 2 !== 0)) {
        throw new QkCheckpointError(
          `${name} has ${inFeatures} inputs, which int4 group size ${groupSize} does not divide (it must be even and divide every projection's inputs); try --group 64.`,
          srcDir,
        );
      }
      let pending: QuantizedLinear | undefined;
      const base = baseName(...at);
      tensors.push({
        name: `${base}.qweight`,
        dtype: bits === 8 ? 'I8' : 'U8',
        shape: bits === 8 ? [out, inFeatures] : [out, inFeatures / 2],
        bytes: async () => {
          const raw = await checkpoint.readTensor(name);
          const from = floatDTypeOf(raw.dtype)!;
          const w = Tensor.fromStorage(convertBytes(raw.bytes, from, 'f32'), raw.shape, 'f32');
          try {
            pending = quantizeLinear(name, w, bits, groupSize);
          } finally {
            w.dispose();
          }
          const q = pending.weight.qweight.data;
          return new Uint8Array(q.buffer, q.byteOffset, q.byteLength);
        },
      });
      tensors.push({
        name: `${base}.scales`,
        dtype: 'F32',
        shape: bits === 8 ? [out] : [out, inFeatures / groupSize],
        bytes: () => {
          const q = pending!;
          pending = undefined;
          const s = q.weight.scales.data;
          const bytes = new Uint8Array(s.byteLength);
          bytes.set(new Uint8Array(s.buffer, s.byteOffset, s.byteLength));
          q.weight.qweight.dispose();
          q.weight.scales.dispose();
          return bytes;
        },
      });
    }
    await mkdir(outDir, { recursive: true });
    let written = 0;
    const result = await writeShardedSafetensors(outDir, tensors, {
      onProgress: (p) =>
        options.onProgress?.({ written: ++written, total: tensors.length, tensor: p.tensor }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    const quantization: QkQuantizationConfig = {
      quant_method: 'qk',
      bits,
      group_size: bits === 4 ? groupSize : null,
      modules: MODULES,
      format_version: 1,
    };
    await writeFile(
      join(outDir, 'config.json'),
      `${JSON.stringify({ ...rawConfig, quantization_config: quantization }, null, 2)}\n`,
    );
    for (const file of ['generation_config.json', ...TOKENIZER_FILES]) {
      await copyFile(join(srcDir, file), join(outDir, file)).catch(() => undefined);
    }
    return { config: quantization, files: result.files };
  } finally {
    await checkpoint.close();
  }
}

/**
 * The `quantization_config` of the checkpoint in `dir`, when it is a qk quantized one; `undefined` for a float
 * checkpoint. Other methods (AWQ, GPTQ, …) are refused with a `QkCheckpointError` naming the method.
 */
export async function readQuantizationConfig(dir: string): Promise<StoredQuantization | undefined> {
  const file = join(dir, 'config.json');
  const json = (await readUntrustedJson(
    file,
    LIMITS.configBytes,
    (r) => new QkCheckpointError(`${r}.`, file),
  )) as Record<string, unknown> | undefined;
  const qc = json?.quantization_config as Record<string, unknown> | undefined;
  if (qc === undefined || qc === null) return undefined;
  const method = typeof qc.quant_method === 'string' ? qc.quant_method.toLowerCase() : qc.quant_method;
  if (method === 'awq' || method === 'gptq') return externalConfig(method, qc, file);
  if (method !== 'qk') {
    throw new QkCheckpointError(
      `has quantization_config.quant_method ${JSON.stringify(qc.quant_method)}; qk loads float checkpoints, its own quantized ones (quant_method "qk", from qk model quantize), and 4-bit AWQ (GEMM) and GPTQ ones.`,
      file,
    );
  }
  const bits = qc.bits;
  const group = qc.group_size;
  if (
    (bits !== 8 && bits !== 4) ||
    (bits === 4 &&
      (typeof group !== 'number' || !Number.isSafeInteger(group) || group < 2 || group % 2 !== 0))
  ) {
    throw new QkCheckpointError(
      `has an invalid qk quantization_config (bits ${JSON.stringify(bits)}, group_size ${JSON.stringify(group)}): bits must be 8 or 4, and int4 needs an even group_size.`,
      file,
    );
  }
  return {
    quant_method: 'qk',
    bits,
    group_size: bits === 4 ? (group as number) : null,
    modules: MODULES,
    format_version: 1,
  };
}

function externalConfig(
  method: ExternalMethod,
  qc: Record<string, unknown>,
  file: string,
): ExternalQuantizationConfig {
  const bits = qc.bits ?? qc.w_bit;
  const group = qc.group_size ?? qc.q_group_size;
  const bad = (why: string) =>
    new QkCheckpointError(`has a ${method.toUpperCase()} quantization_config qk cannot load: ${why}.`, file);
  if (bits !== 4) throw bad(`bits ${JSON.stringify(bits)} (only 4-bit is supported)`);
  if (typeof group !== 'number' || !Number.isSafeInteger(group) || group < 2 || group % 2 !== 0)
    throw bad(
      `group_size ${JSON.stringify(group)} (an even group size is needed; per-column -1 is not supported)`,
    );
  if (method === 'awq') {
    const version = typeof qc.version === 'string' ? qc.version.toLowerCase() : 'gemm';
    if (version !== 'gemm') throw bad(`version "${version}" (only the GEMM packing is supported)`);
    if (qc.zero_point === false) throw bad('zero_point false (only AWQ with zero points is supported)');
    return { quant_method: 'awq', bits: 4, group_size: group, zero_offset: 0 };
  }
  const format = typeof qc.checkpoint_format === 'string' ? qc.checkpoint_format : 'gptq';
  if (format !== 'gptq' && format !== 'gptq_v2') throw bad(`checkpoint_format "${format}"`);
  return { quant_method: 'gptq', bits: 4, group_size: group, zero_offset: format === 'gptq' ? 1 : 0 };
}

function checkShape(dir: string, name: string, got: readonly number[], want: readonly number[]): void {
  if (got.length !== want.length || got.some((d, i) => d !== want[i])) {
    throw new QkCheckpointError(
      `tensor ${name} has shape [${got.join(', ')}], expected [${want.join(', ')}].`,
      dir,
    );
  }
}

/**
 * Loads a quantized checkpoint (qk's, or AWQ/GPTQ repacked): the float tensors (embedding, LM head, norms) in
 * `dtype`, and the quantized projections as they are stored (no re-quantizing, no dequantizing), on `device`
 * (default the CPU; each tensor is copied there as it is read). The returned `weights` have no float projections:
 * hand them to `createEngine` (cpu or layered) together with `quantized`.
 */
export async function loadQuantizedCheckpoint<D extends FloatDType>(
  dir: string,
  config: Qwen3Config,
  qc: StoredQuantization,
  options: {
    dtype: D;
    device?: Device;
    onProgress?: (p: LoadProgress) => void;
    signal?: AbortSignal;
    /** Refuse a float tensor holding NaN or ±Inf, naming it (scales are always checked). */
    checkFinite?: boolean;
  },
): Promise<{ weights: Qwen3Weights<D>; quantized: QuantizedLayer[] }> {
  const checkpoint = await openCheckpoint(dir);
  const device = options.device ?? 'cpu';
  const floats = new Map<string, Tensor<D>>();
  const layers: Record<string, QuantizedLinear>[] = [];
  try {
    const linear = new Set<string>();
    for (let i = 0; i < config.numLayers; i++) for (const k of LINEAR_KEYS) linear.add(linearName(i, k));
    const floatTensors = expectedTensors(config).filter((t) => !linear.has(t.name));
    const missing: string[] = [];
    for (const t of floatTensors) if (!checkpoint.tensors.has(t.name)) missing.push(t.name);
    for (let i = 0; i < config.numLayers; i++) {
      for (const k of LINEAR_KEYS) {
        const parts = qc.quant_method === 'qk' ? ['qweight', 'scales'] : ['qweight', 'qzeros', 'scales'];
        for (const part of parts) {
          const name = `${baseName(i, k)}.${part}`;
          if (!checkpoint.tensors.has(name)) missing.push(name);
        }
      }
    }
    if (missing.length > 0) {
      throw new QkCheckpointError(
        `the quantized checkpoint lacks ${missing.length} tensor(s), e.g. ${missing.slice(0, 3).join(', ')}.`,
        dir,
      );
    }
    const totalBytes = [...checkpoint.tensors.values()].reduce((s, t) => s + t.byteLength, 0);
    let loadedBytes = 0;
    const step = (tensor: string, bytes: number) => {
      if (options.signal?.aborted) throw new QkAbortError('loading weights', options.signal.reason);
      loadedBytes += bytes;
      options.onProgress?.({ loadedBytes, totalBytes, tensor });
    };
    for (const t of floatTensors) {
      const raw = await checkpoint.readTensor(t.name);
      const from = floatDTypeOf(raw.dtype);
      if (from === undefined)
        throw new QkCheckpointError(`tensor ${t.name} has dtype ${raw.dtype}, not a float.`, dir);
      checkShape(dir, t.name, raw.shape, t.shape);
      const storage = convertBytes(raw.bytes, from, options.dtype);
      const at = options.checkFinite ? firstNonFinite(storage as ArrayLike<number>, options.dtype) : -1;
      if (at >= 0)
        throw new QkCheckpointError(
          `tensor ${t.name} holds a non-finite value (NaN or ±Inf) at element ${at}.`,
          dir,
        );
      floats.set(t.name, placed(Tensor.fromStorage(storage, raw.shape, options.dtype), device));
      step(t.name, raw.bytes.byteLength);
    }
    const shapes = Object.fromEntries(
      expectedTensors(config).map((t) => [t.name, t.shape as [number, number]]),
    );
    for (let i = 0; i < config.numLayers; i++) {
      const layer: Record<string, QuantizedLinear> = {};
      layers.push(layer);
      for (const k of LINEAR_KEYS) {
        const [out, n] = shapes[linearName(i, k)]!;
        const base = baseName(i, k);
        if (qc.quant_method !== 'qk') {
          const read32 = async (part: string) => {
            const t = await checkpoint.readTensor(`${base}.${part}`);
            if (t.dtype !== 'I32')
              throw new QkCheckpointError(`tensor ${base}.${part} has dtype ${t.dtype}, expected I32.`, dir);
            return new Int32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
          };
          const sc = await checkpoint.readTensor(`${base}.scales`);
          const from = floatDTypeOf(sc.dtype);
          if (from === undefined)
            throw new QkCheckpointError(
              `tensor ${base}.scales has dtype ${sc.dtype}, expected a float.`,
              dir,
            );
          const packed = {
            qweight: await read32('qweight'),
            qzeros: await read32('qzeros'),
            scales: convertBytes(sc.bytes, from, 'f32'),
            // GPTQ's g_idx is optional in files quantized without act-order; when present it must be sequential.
            ...(qc.quant_method === 'gptq' && checkpoint.tensors.has(`${base}.g_idx`)
              ? { gIdx: await read32('g_idx') }
              : {}),
          };
          const r = repackInt4(qc.quant_method, packed, out, n, qc.group_size, base, qc.zero_offset);
          layer[k] = quantizedOn(
            {
              bits: 4,
              weight: { qweight: r.qweight, scales: r.scales, groupSize: r.groupSize },
              offsets: r.offsets,
            },
            device,
          );
          step(base, packed.qweight.byteLength + packed.qzeros.byteLength + sc.bytes.byteLength);
          continue;
        }
        const qw = await checkpoint.readTensor(`${base}.qweight`);
        const sc = await checkpoint.readTensor(`${base}.scales`);
        if (sc.dtype !== 'F32')
          throw new QkCheckpointError(`tensor ${base}.scales has dtype ${sc.dtype}, expected F32.`, dir);
        const scales = new Float32Array(sc.bytes.buffer, sc.bytes.byteOffset, sc.bytes.byteLength / 4);
        if (qc.bits === 8) {
          if (qw.dtype !== 'I8')
            throw new QkCheckpointError(`tensor ${base}.qweight has dtype ${qw.dtype}, expected I8.`, dir);
          checkShape(dir, `${base}.qweight`, qw.shape, [out, n]);
          checkShape(dir, `${base}.scales`, sc.shape, [out]);
          const q = new Int8Array(qw.bytes.buffer, qw.bytes.byteOffset, qw.bytes.byteLength);
          layer[k] = {
            bits: 8,
            weight: {
              qweight: Tensor.fromStorage(q, [out, n], 'i8'),
              scales: Tensor.fromStorage(scales, [out], 'f32'),
            },
          };
        } else {
          const g = qc.group_size!;
          if (qw.dtype !== 'U8')
            throw new QkCheckpointError(`tensor ${base}.qweight has dtype ${qw.dtype}, expected U8.`, dir);
          if (n % g !== 0)
            throw new QkCheckpointError(`group_size ${g} does not divide the ${n} inputs of ${base}.`, dir);
          checkShape(dir, `${base}.qweight`, qw.shape, [out, n / 2]);
          checkShape(dir, `${base}.scales`, sc.shape, [out, n / g]);
          const q = new Uint8Array(qw.bytes.buffer, qw.bytes.byteOffset, qw.bytes.byteLength);
          layer[k] = {
            bits: 4,
            weight: {
              qweight: Tensor.fromStorage(q, [out, n / 2], 'u8'),
              scales: Tensor.fromStorage(scales, [out, n / g], 'f32'),
              groupSize: g,
            },
          };
        }
        for (let j = 0; j < scales.length; j++) {
          if (!Number.isFinite(scales[j]!))
            throw new QkCheckpointError(
              `tensor ${base}.scales holds a non-finite scale at element ${j}.`,
              dir,
            );
        }
        layer[k] = quantizedOn(layer[k]!, device);
        step(base, qw.bytes.byteLength + sc.bytes.byteLength);
      }
    }
    // The projections are absent from the float weights: the cpu engine runs `quantized` in their place.
    const weights = assembleWeights(config, (name) => floats.get(name) as Tensor<D>);
    return { weights, quantized: layers as unknown as QuantizedLayer[] };
  } catch (e) {
    for (const t of floats.values()) t.dispose();
    disposeQuantizedLayers(layers as Partial<QuantizedLayer>[]);
    throw e;
  } finally {
    await checkpoint.close();
  }
}
