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
  type MegakernelTuningArgs,
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
      'findNonFinite',
      'rope',
      'qkNormRope',
      'qkNormRopeAppend',
      'swiglu',
      'embedding',
      'linear',
      'linearSwiglu',
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
      'applyLogitControls',
      'addTokenCounts',
      'tokenLogprobs',
      'tokenLogprobsScratchBytes',
      'megakernelHistory',
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

  it('checks the megakernel tuning object before any CUDA call, naming the field', () => {
    const plan = (tuning: unknown) => () =>
      b.megakernelPlan(256, 4, 2, 384, 2, 1000, tuning as MegakernelTuningArgs);
    expect(plan({ inflight: 2000 })).toThrow(
      /megakernelPlan: argument "tuning\.inflight" must be an integer in \[0, 1024\], got 2000/,
    );
    expect(plan({ stagedHf: 1.5 })).toThrow(
      /argument "tuning\.stagedHf" must be an integer in \[0, 2\], got 1\.5/,
    );
    expect(plan({ claimTiles: 1 })).toThrow(/argument "tuning\.claimTiles" must be a boolean/);
    expect(plan({ debug: 16 })).toThrow(
      /argument "tuning\.debug" must be a non-negative integer of the bits in 111/,
    );
    expect(plan({ slotKB: 20 })).toThrow(
      /argument "tuning\.slotKB" is not a megakernel tuning field \(known: slotKb/,
    );
    expect(plan(null)).toThrow(/argument "tuning" must be an object/);
    // megakernelCreate reads the same object first, before its pointers are checked.
    const create = b.megakernelCreate as (...args: unknown[]) => number;
    const args = [DTypeCode.bf16, 256, 4, 2, 384, 2, 1000, 1000, 16, 1e-6, new BigUint64Array(20)];
    expect(() => create(...args, ...Array(9).fill(1n), { timeoutMs: 0 })).toThrow(
      /megakernelCreate: argument "tuning\.timeoutMs" must be an integer in \[1, 86400000\], got 0/,
    );
    // The table @qk/ops compares its own with when it loads the addon.
    const fields = b.megakernelTuningFields;
    expect(Object.isFrozen(fields)).toBe(true);
    expect(fields.inflight).toEqual({ kind: 'integer', min: 0, max: 1024 });
    expect(fields.claimTiles).toEqual({ kind: 'boolean' });
    expect(fields.debug).toEqual({ kind: 'bits', mask: 111 });
    expect(Object.keys(fields)).toHaveLength(19);
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
