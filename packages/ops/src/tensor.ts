/**
 * `Tensor<D>`: a dense, row-major, contiguous n-d array whose element type `D` is part of its type.
 *
 * Storage is a typed array (`StorageOf<D>`); f16/bf16 elements are stored as raw 16-bit patterns and
 * decoded by `toArray()` / `toFloat32Array()`. `reshape` and `slice` return views that share storage.
 * Tensors are released with `dispose()` (or `using t = …`); a disposed tensor throws on any access.
 */

import { cudaBinding, dtypeCode, nativeCall } from './backend/cuda.js';
import { bufferFinalizer, DeviceBuffer } from './backend/device-buffer.js';
import {
  allocStorage,
  bf16BitsToF32,
  DTYPES,
  type DType,
  decodeFloats,
  type FloatDType,
  f16BitsToF32,
  isFloatDType,
  roundToDType,
  type StorageOf,
} from './dtype.js';
import {
  QkDeviceError,
  QkDisposedError,
  QkDtypeError,
  QkIndexError,
  QkShapeError,
  QkValueError,
} from './errors.js';
import { Rng } from './random.js';
import { checkDType, encode, flatten, inferShape, type NestedArray, nextBelow } from './tensor-values.js';

export type { NestedArray };

import { formatShape, type Shape, shapeSize, validateShape } from './shape.js';

/** Where a tensor's elements live. Only `'cpu'` exists until the CUDA backend (`@qk/cuda-core`) is installed. */
export type Device = 'cpu' | 'cuda';

/** Where a CUDA tensor's elements are: a shared device buffer and this tensor's byte offset into it. */
interface CudaStore {
  readonly buffer: DeviceBuffer;
  readonly byteOffset: number;
}

/** Device address of a CUDA tensor's first element (for the op dispatchers; not part of the public API). */
export let deviceAddress: (t: Tensor) => bigint;

/** Options of the random constructors. */
export interface RandomOptions<D extends FloatDType> {
  /** Element type (default `'f32'`). */
  dtype?: D;
  /** Seed of a fresh PCG32 stream (default 0). Ignored when `rng` is given. */
  seed?: number | bigint;
  /** Draw from this generator instead, continuing its stream. */
  rng?: Rng;
}

export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly shape: Shape;
  readonly device: Device;
  #data: StorageOf<D> | null = null;
  #cuda: CudaStore | null = null;
  #disposed = false;

  static {
    deviceAddress = (t: Tensor): bigint => {
      if (t.#disposed) throw new QkDisposedError('Tensor (device address)');
      if (t.#cuda === null) throw new QkDeviceError(`the tensor is on "${t.device}", not "cuda".`, 'Tensor');
      return t.#cuda.buffer.ptr + BigInt(t.#cuda.byteOffset);
    };
  }

  private constructor(store: StorageOf<D> | CudaStore, shape: Shape, dtype: D) {
    this.shape = shape;
    this.dtype = dtype;
    if (ArrayBuffer.isView(store)) {
      this.#data = store;
      this.device = 'cpu';
    } else {
      this.#cuda = store;
      this.device = 'cuda';
      bufferFinalizer.register(this, store.buffer, this);
    }
  }

  /**
   * An uninitialised tensor (zeros on the CPU) on `device`: for outputs that an op will overwrite entirely.
   */
  static empty<D extends DType = 'f32'>(shape: Shape, dtype?: D, device: Device = 'cpu'): Tensor<D> {
    const op = 'Tensor.empty';
    const d = checkDType(dtype ?? 'f32', op) as D;
    const s = validateShape(shape, op);
    if (device === 'cpu') return new Tensor(allocStorage(d, shapeSize(s)), s, d);
    if (device !== 'cuda')
      throw new QkValueError(op, 'device', `must be "cpu" or "cuda", got ${String(device)}.`);
    return Tensor.#allocCuda(s, d, op);
  }

  static #allocCuda<D extends DType>(shape: Shape, dtype: D, op: string): Tensor<D> {
    const bytes = shapeSize(shape) * DTYPES[dtype].bytes;
    return new Tensor({ buffer: DeviceBuffer.allocate(bytes, op), byteOffset: 0 }, shape, dtype);
  }

  /**
   * Wraps existing storage without copying. f16/bf16 storage holds raw bit patterns.
   * @throws QkShapeError when `data.length` differs from the size of `shape`.
   */
  static fromStorage<D extends DType>(data: StorageOf<D>, shape: Shape, dtype: D): Tensor<D> {
    const op = 'Tensor.fromStorage';
    checkDType(dtype, op);
    const s = validateShape(shape, op);
    const expectedCtor = allocStorage(dtype, 0).constructor;
    if (!(data instanceof expectedCtor)) {
      throw new QkDtypeError({
        op,
        arg: 'data',
        expected: `a ${expectedCtor.name} for ${dtype}`,
        got: Object.prototype.toString.call(data),
      });
    }
    if (data.length !== shapeSize(s)) {
      throw new QkShapeError({
        op,
        arg: 'data',
        expected: `${shapeSize(s)} elements for shape ${formatShape(s)}`,
        got: `${data.length} elements`,
      });
    }
    return new Tensor(data, s, dtype);
  }

  /**
   * Builds a tensor from numbers: a flat array or typed array (with `shape`), or nested arrays (shape inferred).
   * Float dtypes round to nearest even; integer dtypes refuse non-integers and out-of-range values.
   */
  static fromArray<D extends DType = 'f32'>(
    values: ArrayLike<number> | NestedArray,
    options: { shape?: Shape; dtype?: D } = {},
  ): Tensor<D> {
    const op = 'Tensor.fromArray';
    const dtype = checkDType(options.dtype ?? 'f32', op) as D;
    let flat: ArrayLike<number>;
    let shape: Shape;
    if (typeof values === 'number' || Array.isArray(values)) {
      const inferred = inferShape(values as NestedArray, op);
      const isNested =
        inferred.length > 1 || (Array.isArray(values) && values.some((v) => typeof v !== 'number'));
      flat =
        isNested || typeof values === 'number'
          ? flatten(values as NestedArray, inferred, op)
          : (values as number[]);
      shape = options.shape === undefined ? inferred : validateShape(options.shape, op);
    } else if (
      values !== null &&
      typeof values === 'object' &&
      typeof (values as ArrayLike<number>).length === 'number'
    ) {
      flat = values as ArrayLike<number>;
      shape = options.shape === undefined ? [flat.length] : validateShape(options.shape, op);
    } else {
      throw new QkValueError(
        op,
        'values',
        'must be a number, an array of numbers, nested arrays or a typed array.',
      );
    }
    if (shapeSize(shape) !== flat.length) {
      throw new QkShapeError({
        op,
        arg: 'shape',
        expected: `a shape of ${flat.length} elements`,
        got: formatShape(shape),
      });
    }
    return new Tensor(encode(flat, dtype, op), Object.freeze([...shape]), dtype);
  }

  /** A tensor of zeros. */
  static zeros<D extends DType = 'f32'>(shape: Shape, dtype?: D): Tensor<D> {
    const op = 'Tensor.zeros';
    const d = checkDType(dtype ?? 'f32', op) as D;
    const s = validateShape(shape, op);
    return new Tensor(allocStorage(d, shapeSize(s)), s, d);
  }

  /** A tensor of ones. */
  static ones<D extends DType = 'f32'>(shape: Shape, dtype?: D): Tensor<D> {
    return Tensor.full(shape, 1, dtype);
  }

  /** A tensor filled with `value` (rounded to the dtype; integer dtypes need an in-range integer). */
  static full<D extends DType = 'f32'>(shape: Shape, value: number, dtype?: D): Tensor<D> {
    const op = 'Tensor.full';
    const d = checkDType(dtype ?? 'f32', op) as D;
    const s = validateShape(shape, op);
    if (typeof value !== 'number')
      throw new QkValueError(op, 'value', `must be a number, got ${typeof value}.`);
    const one = encode([value], d, op, false, 'value');
    const data = allocStorage(d, shapeSize(s));
    data.fill(one[0]!);
    return new Tensor(data, s, d);
  }

  /** `[start, start + step, …)` up to but excluding `end`, like `torch.arange`. With one number, `[0, end)`. */
  static arange<D extends DType = 'f32'>(
    start: number,
    end?: number,
    options: { step?: number; dtype?: D } = {},
  ): Tensor<D> {
    const op = 'Tensor.arange';
    const [from, to] = end === undefined ? [0, start] : [start, end];
    const step = options.step ?? 1;
    if (!Number.isFinite(from) || !Number.isFinite(to))
      throw new QkValueError(op, 'end', 'and start must be finite numbers.');
    if (!Number.isFinite(step) || step === 0)
      throw new QkValueError(op, 'step', `must be a finite non-zero number, got ${step}.`);
    const dtype = checkDType(options.dtype ?? 'f32', op) as D;
    if ((to - from) * step < 0) {
      throw new QkValueError(op, 'step', `(${step}) points away from end (${to}) when starting at ${from}.`);
    }
    const n = Math.ceil((to - from) / step);
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) values[i] = from + i * step;
    return new Tensor(encode(values, dtype, op), Object.freeze([n]), dtype);
  }

  /** Normally distributed values (`mean` 0 and `std` 1 by default) from a seeded, machine-independent stream. */
  static randn<D extends FloatDType = 'f32'>(
    shape: Shape,
    options: RandomOptions<D> & { mean?: number; std?: number } = {},
  ): Tensor<D> {
    const { mean = 0, std = 1 } = options;
    return Tensor.#random(shape, options, 'Tensor.randn', (rng) => mean + std * rng.nextNormal());
  }

  /** Uniform values in `[low, high)` (default `[0, 1)`) from a seeded, machine-independent stream. */
  static rand<D extends FloatDType = 'f32'>(
    shape: Shape,
    options: RandomOptions<D> & { low?: number; high?: number } = {},
  ): Tensor<D> {
    const op = 'Tensor.rand';
    const { low = 0, high = 1 } = options;
    if (!Number.isFinite(low)) throw new QkValueError(op, 'low', `must be a finite number, got ${low}.`);
    if (!Number.isFinite(high)) throw new QkValueError(op, 'high', `must be a finite number, got ${high}.`);
    if (!(high > low)) throw new QkValueError(op, 'high', `must exceed low (${low}), got ${high}.`);
    const dtype: FloatDType = options.dtype ?? 'f32';
    return Tensor.#random(shape, options, op, (rng) => {
      const v = low + (high - low) * rng.nextFloat();
      // v < high, but rounding to the dtype can carry it up to high: step down to keep the range half-open.
      const r = roundToDType(v, dtype);
      return r < high ? v : nextBelow(r, dtype);
    });
  }

  static #random<D extends FloatDType>(
    shape: Shape,
    options: RandomOptions<D>,
    op: string,
    draw: (rng: Rng) => number,
  ): Tensor<D> {
    const d = checkDType(options.dtype ?? 'f32', op) as D;
    if (!isFloatDType(d)) throw new QkDtypeError({ op, arg: 'dtype', expected: 'f32, f16 or bf16', got: d });
    const s = validateShape(shape, op);
    const rng = options.rng ?? new Rng(options.seed ?? 0);
    const values = new Float64Array(shapeSize(s));
    for (let i = 0; i < values.length; i++) values[i] = draw(rng);
    return new Tensor(encode(values, d, op), s, d);
  }

  /**
   * Raw storage (bit patterns for f16/bf16) of a CPU tensor. Mutating it mutates the tensor and every view of
   * it. A CUDA tensor has no host storage: use `toArray()` or `to('cpu')`.
   */
  get data(): StorageOf<D> {
    if (this.#disposed) throw new QkDisposedError('Tensor.data');
    if (this.#data === null) {
      throw new QkDeviceError(
        'the tensor is on "cuda"; read it with toArray() or move it with to(\'cpu\').',
        'Tensor.data',
      );
    }
    return this.#data;
  }

  /** Host storage: the CPU storage itself, or a fresh copy of a CUDA tensor's elements. */
  #hostData(op: string): StorageOf<D> {
    if (this.#disposed) throw new QkDisposedError(op);
    if (this.#data !== null) return this.#data;
    const store = this.#cuda!;
    const host = allocStorage(this.dtype, this.size);
    const binding = cudaBinding(op);
    nativeCall(op, () => binding.copyToHost(host, store.buffer.ptr + BigInt(store.byteOffset)));
    return host;
  }

  /** Number of elements. */
  get size(): number {
    return shapeSize(this.shape);
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Bytes of storage (packed int4 counts as its u8 bytes). */
  get nbytes(): number {
    return this.size * DTYPES[this.dtype].bytes;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** The elements as plain numbers, flat in row-major order (f16/bf16 decoded exactly); copies from the GPU. */
  toArray(): number[] {
    const data = this.#hostData('Tensor.toArray');
    if (this.dtype === 'bf16') return Array.from(data as Uint16Array, bf16BitsToF32);
    if (this.dtype === 'f16') return Array.from(data as Uint16Array, f16BitsToF32);
    return Array.from(data as ArrayLike<number>);
  }

  /** A new Float32Array of the (decoded) elements. Integer values beyond 2^24 lose precision. */
  toFloat32Array(): Float32Array {
    const data = this.#hostData('Tensor.toFloat32Array');
    if (isFloatDType(this.dtype)) return decodeFloats(data as Float32Array | Uint16Array, this.dtype);
    return Float32Array.from(data as ArrayLike<number>);
  }

  /** The only element of a one-element tensor. */
  item(): number {
    if (this.size !== 1) {
      throw new QkShapeError({
        op: 'Tensor.item',
        arg: 'this',
        expected: 'exactly one element',
        got: formatShape(this.shape),
      });
    }
    return this.toArray()[0]!;
  }

  /**
   * A copy converted to another dtype (floats round to nearest even; float → integer truncates toward zero
   * and refuses NaN or out-of-range values), or to another device.
   */
  to<T extends DType>(target: T): Tensor<T>;
  to(target: Device): Tensor<D>;
  to(target: DType | Device): Tensor<DType> {
    const op = 'Tensor.to';
    if (target === this.device) return this.clone();
    if (target === 'cpu') return new Tensor(this.#hostData(op), this.shape, this.dtype);
    if (target === 'cuda') {
      const out = Tensor.#allocCuda(this.shape, this.dtype, op);
      const data = this.#hostData(op);
      const binding = cudaBinding(op);
      nativeCall(op, () => binding.copyToDevice(deviceAddress(out), data));
      return out;
    }
    const dtype = checkDType(target, op);
    if (dtype === this.dtype) return this.clone() as Tensor<DType>;
    if (this.device === 'cuda') {
      if (isFloatDType(this.dtype) && isFloatDType(dtype)) {
        const out = Tensor.#allocCuda(this.shape, dtype, op);
        const binding = cudaBinding(op);
        const [from, to] = [dtypeCode(this.dtype), dtypeCode(dtype)];
        nativeCall(op, () =>
          binding.unary(from, to, 5, deviceAddress(out), deviceAddress(this), this.size, 0),
        );
        return out;
      }
      return this.to('cpu').to(dtype).to('cuda');
    }
    const values = isFloatDType(this.dtype) ? this.toFloat32Array() : (this.data as ArrayLike<number>);
    return new Tensor(encode(values, dtype, op, true, 'this'), this.shape, dtype);
  }

  /** A copy with its own storage, on the same device. */
  clone(): Tensor<D> {
    if (this.#cuda !== null) {
      const op = 'Tensor.clone';
      if (this.#disposed) throw new QkDisposedError(op);
      const out = Tensor.#allocCuda(this.shape, this.dtype, op);
      const binding = cudaBinding(op);
      nativeCall(op, () => binding.copyDeviceToDevice(deviceAddress(out), deviceAddress(this), this.nbytes));
      return out;
    }
    return new Tensor(this.data.slice() as StorageOf<D>, this.shape, this.dtype);
  }

  /**
   * Copies `src`'s elements into this tensor in place (same dtype and number of elements; shapes may differ).
   * Works within and across devices; on `'cuda'` it is one device copy on the op stream (qk's vectorised copy
   * kernel, or `cudaMemcpyAsync` with `via: 'memcpy'`), so it can be captured in a CUDA graph (a KV-cache append,
   * say).
   */
  copyFrom(src: Tensor<D>, options: { via?: 'kernel' | 'memcpy' } = {}): this {
    const op = 'Tensor.copyFrom';
    if (this.#disposed) throw new QkDisposedError(op);
    if (!(src instanceof Tensor) || src.disposed) throw new QkValueError(op, 'src', 'must be a live Tensor.');
    if (src.dtype !== this.dtype)
      throw new QkDtypeError({ op, arg: 'src', expected: this.dtype, got: src.dtype });
    if (src.size !== this.size) {
      throw new QkShapeError({
        op,
        arg: 'src',
        expected: `${this.size} elements`,
        got: `${formatShape(src.shape)} (${src.size})`,
      });
    }
    if (this.#data !== null && src.device === 'cpu') {
      (this.#data as Uint8Array).set(src.data as Uint8Array);
      return this;
    }
    const binding = cudaBinding(op);
    if (this.#data !== null) {
      const dst = this.#data;
      nativeCall(op, () => binding.copyToHost(dst, deviceAddress(src)));
    } else if (src.device === 'cpu') {
      const data = src.data;
      nativeCall(op, () => binding.copyToDevice(deviceAddress(this), data));
    } else {
      const [dst, from, bytes] = [deviceAddress(this), deviceAddress(src), this.nbytes];
      if (options.via === 'memcpy') nativeCall(op, () => binding.copyDeviceToDevice(dst, from, bytes));
      else nativeCall(op, () => binding.copyKernel(dst, from, bytes));
    }
    return this;
  }

  /** A view of the same storage with another shape, starting `elementOffset` elements in. */
  #view(shape: Shape, elementOffset: number, count: number): Tensor<D> {
    if (this.#cuda !== null) {
      const { buffer, byteOffset } = this.#cuda;
      return new Tensor(
        { buffer: buffer.retain(), byteOffset: byteOffset + elementOffset * DTYPES[this.dtype].bytes },
        shape,
        this.dtype,
      );
    }
    return new Tensor(
      this.data.subarray(elementOffset, elementOffset + count) as StorageOf<D>,
      shape,
      this.dtype,
    );
  }

  /** A view with a new shape of the same size; one extent may be -1 and is inferred. */
  reshape(shape: readonly number[]): Tensor<D> {
    const op = 'Tensor.reshape';
    if (this.#disposed) throw new QkDisposedError(op);
    if (!Array.isArray(shape))
      throw new QkShapeError({ op, arg: 'shape', expected: 'an array of integers', got: String(shape) });
    const inferAt = shape.indexOf(-1);
    if (inferAt !== shape.lastIndexOf(-1)) {
      throw new QkShapeError({ op, arg: 'shape', expected: 'at most one -1', got: formatShape(shape) });
    }
    let resolved = shape;
    if (inferAt >= 0) {
      const known = shapeSize(shape.filter((_, i) => i !== inferAt));
      if (known === 0 || this.size % known !== 0) {
        throw new QkShapeError({
          op,
          arg: 'shape',
          expected: `a shape whose size divides ${this.size}`,
          got: formatShape(shape),
        });
      }
      resolved = shape.map((d, i) => (i === inferAt ? this.size / known : d));
    }
    const s = validateShape(resolved, op);
    if (shapeSize(s) !== this.size) {
      throw new QkShapeError({
        op,
        arg: 'shape',
        expected: `${this.size} elements (from ${formatShape(this.shape)})`,
        got: `${formatShape(s)} with ${shapeSize(s)}`,
      });
    }
    return this.#view(s, 0, this.size);
  }

  /**
   * A view of rows `[start, end)` along the first axis. Negative indices count from the end; `end` defaults to
   * the length of the first axis.
   */
  slice(start: number, end?: number): Tensor<D> {
    const op = 'Tensor.slice';
    if (this.#disposed) throw new QkDisposedError(op);
    if (this.rank === 0) throw new QkShapeError({ op, arg: 'this', expected: 'rank >= 1', got: 'a scalar' });
    const n = this.shape[0]!;
    const resolve = (i: number, arg: string): number => {
      if (!Number.isInteger(i)) throw new QkValueError(op, arg, `must be an integer, got ${i}.`);
      const r = i < 0 ? n + i : i;
      if (r < 0 || r > n) throw new QkIndexError(op, arg, i, n + 1, `for a first axis of length ${n}`);
      return r;
    };
    const from = resolve(start, 'start');
    const to = end === undefined ? n : resolve(end, 'end');
    if (to < from) throw new QkValueError(op, 'end', `(${end}) must not come before start (${start}).`);
    const rowSize = shapeSize(this.shape.slice(1));
    return this.#view(
      Object.freeze([to - from, ...this.shape.slice(1)]),
      from * rowSize,
      (to - from) * rowSize,
    );
  }

  /** Releases the storage; any later access throws `QkDisposedError`. Calling it twice is harmless. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#data = null;
    if (this.#cuda !== null) {
      bufferFinalizer.unregister(this);
      this.#cuda.buffer.release();
      this.#cuda = null;
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor<${this.dtype}>${formatShape(this.shape)} on ${this.device}${this.disposed ? ' (disposed)' : ''}`;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString();
  }
}

/** Any tensor whose dtype is a float type. */
export type FloatTensor = Tensor<FloatDType>;
