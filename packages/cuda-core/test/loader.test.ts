/**
 * The loader and the binding layer without a GPU (CI has nvcc but no driver): every failure is one actionable
 * message, and the binding checks its arguments before any CUDA call.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  addonCandidates,
  type Binding,
  CudaUnavailableError,
  cudaAvailable,
  cudaStatus,
  DTypeCode,
  loadBinding,
  resetBindingCache,
} from '../src/index.js';

const builtAddon = addonCandidates().find((p) => p.endsWith(join('build', 'Release', 'qk_cuda.node')))!;
const gpu = cudaAvailable();

afterEach(() => {
  delete process.env.QK_CUDA_ADDON;
  resetBindingCache();
});

describe('loader', () => {
  it('looks beside a bundle and in the build folder, and QK_CUDA_ADDON first', () => {
    process.env.QK_CUDA_ADDON = '/somewhere/qk_cuda.node';
    const list = addonCandidates();
    expect(list[0]).toBe('/somewhere/qk_cuda.node');
    expect(list.some((p) => p.endsWith(join('build', 'Release', 'qk_cuda.node')))).toBe(true);
  });

  it.runIf(!gpu)('without a GPU: unavailable, with the driver named as the cause', () => {
    const status = cudaStatus();
    expect(status.available).toBe(false);
    if (!status.available) {
      expect(status.causes.length).toBeGreaterThan(0);
      expect(status.reason).toMatch(/driver|device|qk_cuda\.node/);
    }
    expect(() => loadBinding()).toThrow(CudaUnavailableError);
  });

  it('a file that is not an addon is reported as not loadable, with a remedy', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qk-addon-'));
    const fake = join(dir, 'qk_cuda.node');
    writeFileSync(fake, 'not an ELF file');
    process.env.QK_CUDA_ADDON = fake;
    let caught: unknown;
    try {
      loadBinding();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(CudaUnavailableError);
    const err = caught as CudaUnavailableError;
    expect(err.code).toBe('QK_CUDA_UNAVAILABLE');
    expect(
      err.causes.some((c) => c.includes(fake) && c.includes('cannot be loaded') && c.includes('rebuild')),
    ).toBe(true);
  });
});

describe('binding argument checks (no CUDA call is made)', () => {
  // Loaded directly, bypassing the probe: argument checks run before any CUDA work, so they work without a GPU.
  const b = createRequire(import.meta.url)(builtAddon) as Binding;

  it('exports every function of the typed Binding contract', () => {
    const fns = [
      'probe',
      'deviceInfo',
      'malloc',
      'free',
      'copyToDevice',
      'copyToHost',
      'copyDeviceToDevice',
      'copyKernel',
      'memset',
      'memoryStats',
      'emptyCache',
      'synchronize',
      'eventCreate',
      'eventRecord',
      'eventElapsedMs',
      'eventDestroy',
      'captureBegin',
      'captureEnd',
      'graphLaunch',
      'graphDestroy',
      'rmsnorm',
      'fusedAddRmsnorm',
      'unary',
      'binary',
      'rowMean',
      'rope',
      'qkNormRope',
      'qkNormRopeAppend',
      'swiglu',
      'embedding',
      'linear',
      'rmsnormLinear',
      'quantizeInt8',
      'quantizeInt4',
      'linearInt8',
      'linearInt4',
      'attentionDecodeWorkspaceBytes',
      'attentionDecode',
      'attentionPrefill',
      'argmax',
      'sampleWorkspaceBytes',
      'sample',
    ] as const;
    for (const f of fns) expect(typeof b[f], f).toBe('function');
    expect(b.abiVersion).toBe(1);
  });

  it('names the argument in a TypeError for wrong types', () => {
    expect(() => b.rmsnorm(DTypeCode.bf16, 1 as unknown as bigint, 2n, 3n, 1, 8, 1e-6)).toThrow(
      /rmsnorm: argument "out" must be a bigint device address/,
    );
    expect(() => b.rmsnorm(7 as never, 1n, 2n, 3n, 1, 8, 1e-6)).toThrow(/rmsnorm: argument "dtype"/);
    expect(() => b.rmsnorm(DTypeCode.i32 as never, 1n, 2n, 3n, 1, 8, 1e-6)).toThrow(/must be a float dtype/);
    expect(() => b.rmsnorm(DTypeCode.bf16, 1n, 2n, 3n, 1.5, 8, 1e-6)).toThrow(
      /argument "rows" must be an integer/,
    );
    expect(() => b.malloc(-1)).toThrow(/malloc: argument "bytes"/);
    expect(() => (b.rmsnorm as (...a: unknown[]) => void)(DTypeCode.bf16)).toThrow(/expected 7 arguments/);
  });

  it('refuses device addresses that are not inside live GPU memory (no use-after-free reaches a kernel)', () => {
    expect(() =>
      b.rmsnorm(DTypeCode.bf16, 0x7f0000001000n, 0x7f0000002000n, 0x7f0000003000n, 4, 64, 1e-6),
    ).toThrow(/rmsnorm: argument "out" does not point into live GPU memory/);
    expect(() => b.free(0x1234n)).toThrow(/not a live allocation/);
  });

  it('reports allocator counters without touching the device', () => {
    const s = b.memoryStats();
    expect(s).toEqual(
      expect.objectContaining({ allocatedBytes: expect.any(Number), cudaMallocCalls: expect.any(Number) }),
    );
  });

  it.runIf(!gpu)('a CUDA call without a driver is an Error with code QK_CUDA naming the op', () => {
    let caught: unknown;
    try {
      b.malloc(1024);
    } catch (e) {
      caught = e;
    }
    const err = caught as { code?: string; op?: string; message?: string };
    expect(err.code).toBe('QK_CUDA');
    expect(err.message).toMatch(/cudaErrorInsufficientDriver|cudaErrorNoDevice/);
  });
});
