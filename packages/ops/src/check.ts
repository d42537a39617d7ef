/** Argument checks shared by every op: each throws a typed error naming the op, the argument, expected and got. */
import { type DType, type FloatDType, isFloatDType } from './dtype.js';
import { QkDeviceError, QkDisposedError, QkDtypeError, QkShapeError, QkValueError } from './errors.js';
import { formatShape, type Shape } from './shape.js';
import { type Device, deviceAddress, Tensor } from './tensor.js';

/** Checks that `t` is a live tensor (on any device). */
export function checkTensor(op: string, arg: string, t: unknown): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new QkValueError(op, arg, `must be a Tensor, got ${t === null ? 'null' : typeof t}.`);
  }
  if (t.disposed) throw new QkDisposedError(`${op} (argument "${arg}")`);
}

/**
 * The one device all the given tensors live on; throws `QkDeviceError` naming the first argument on another
 * device. Undefined entries (absent optional arguments) are skipped.
 */
export function commonDevice(op: string, tensors: Record<string, Tensor | undefined>): Device {
  let first: [string, Device] | undefined;
  for (const [arg, t] of Object.entries(tensors)) {
    if (t === undefined) continue;
    if (first === undefined) first = [arg, t.device];
    else if (t.device !== first[1]) {
      throw new QkDeviceError(
        `argument "${arg}" is on "${t.device}" but "${first[0]}" is on "${first[1]}": move them to one device with .to().`,
        op,
      );
    }
  }
  return first?.[1] ?? 'cpu';
}

/** Throws `QkDeviceError` when an op that only has a CPU reference receives a CUDA tensor. */
export function requireCpu(op: string, tensors: Record<string, Tensor | undefined>): void {
  if (commonDevice(op, tensors) !== 'cpu') {
    throw new QkDeviceError(`has no CUDA kernel; move its inputs to the CPU with .to('cpu').`, op);
  }
}

/**
 * Checks a caller-supplied output tensor (an `out`-style option named `arg`): live, on `device`, of `dtype` and
 * `shape`.
 */
export function checkOutput(
  op: string,
  arg: string,
  t: unknown,
  shape: Shape,
  dtype: DType,
  device: Device,
): asserts t is Tensor {
  checkTensor(op, arg, t);
  if (t.device !== device) {
    throw new QkDeviceError(`argument "${arg}" must be on "${device}" like the inputs.`, op);
  }
  if (t.dtype !== dtype) throw new QkDtypeError({ op, arg, expected: dtype, got: t.dtype });
  checkShape(op, arg, t, shape);
}

/**
 * Whether the elements of `a` and `b` share any byte: views of one CPU buffer, or of one CUDA allocation, whose
 * byte ranges intersect. Tensors on different devices or without elements never overlap.
 */
export function tensorsOverlap(a: Tensor, b: Tensor): boolean {
  if (a.device !== b.device || a.nbytes === 0 || b.nbytes === 0) return false;
  if (a.device === 'cuda') {
    const [pa, pb] = [deviceAddress(a), deviceAddress(b)];
    return pa < pb + BigInt(b.nbytes) && pb < pa + BigInt(a.nbytes);
  }
  const [da, db] = [a.data, b.data];
  if (da.buffer !== db.buffer) return false;
  return da.byteOffset < db.byteOffset + db.byteLength && db.byteOffset < da.byteOffset + da.byteLength;
}

/**
 * Throws `QkValueError` when output `t` (argument `arg`) shares memory with one of `others` (absent ones skipped);
 * `why` completes the sentence with the reason and what to do.
 */
export function checkNoOverlap(
  op: string,
  arg: string,
  t: Tensor,
  others: Record<string, Tensor | undefined>,
  why: string,
): void {
  for (const [name, other] of Object.entries(others)) {
    if (other !== undefined && tensorsOverlap(t, other)) {
      throw new QkValueError(op, arg, `shares memory with "${name}": ${why}`);
    }
  }
}

export function checkFloat(op: string, arg: string, t: unknown): asserts t is Tensor<FloatDType> {
  checkTensor(op, arg, t);
  if (!isFloatDType(t.dtype)) throw new QkDtypeError({ op, arg, expected: 'f32, f16 or bf16', got: t.dtype });
}

export function checkDtype<D extends DType>(
  op: string,
  arg: string,
  t: unknown,
  allowed: readonly D[],
): asserts t is Tensor<D> {
  checkTensor(op, arg, t);
  if (!(allowed as readonly DType[]).includes(t.dtype)) {
    throw new QkDtypeError({ op, arg, expected: allowed.join(' or '), got: t.dtype });
  }
}

export function checkRank(
  op: string,
  arg: string,
  t: Tensor,
  rank: number | { min: number },
  hint?: string,
): void {
  const ok = typeof rank === 'number' ? t.rank === rank : t.rank >= rank.min;
  if (!ok) {
    const expected = typeof rank === 'number' ? `rank ${rank}` : `rank >= ${rank.min}`;
    throw new QkShapeError({
      op,
      arg,
      expected,
      got: `${formatShape(t.shape)} (rank ${t.rank})`,
      ...(hint ? { hint } : {}),
    });
  }
}

/** Checks `t.shape[axis]` (negative axis counts from the end) equals `expected`. */
export function checkDim(
  op: string,
  arg: string,
  t: Tensor,
  axis: number,
  expected: number,
  hint?: string,
): void {
  const a = axis < 0 ? t.rank + axis : axis;
  if (t.shape[a] !== expected) {
    const shape = t.shape.map((_d, i) => (i === a ? String(expected) : '·'));
    throw new QkShapeError({
      op,
      arg,
      expected: `[${shape.join(', ')}]`,
      got: formatShape(t.shape),
      ...(hint ? { hint } : {}),
    });
  }
}

export function checkShape(
  op: string,
  arg: string,
  t: Tensor,
  expected: readonly number[],
  hint?: string,
): void {
  if (t.rank !== expected.length || t.shape.some((d, i) => d !== expected[i])) {
    throw new QkShapeError({
      op,
      arg,
      expected: formatShape(expected),
      got: formatShape(t.shape),
      ...(hint ? { hint } : {}),
    });
  }
}

export function checkSameDtype(op: string, arg: string, t: Tensor, other: Tensor, otherArg: string): void {
  if (t.dtype !== other.dtype) {
    throw new QkDtypeError({
      op,
      arg,
      expected: `${other.dtype} (the dtype of "${otherArg}")`,
      got: t.dtype,
    });
  }
}

export function checkFinite(op: string, arg: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new QkValueError(op, arg, `must be a finite number, got ${String(v)}.`);
  return v;
}

export function checkPositive(op: string, arg: string, v: unknown): number {
  const x = checkFinite(op, arg, v);
  if (x <= 0) throw new QkValueError(op, arg, `must be positive, got ${x}.`);
  return x;
}

export function checkPositiveInt(op: string, arg: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) {
    throw new QkValueError(op, arg, `must be a positive integer, got ${String(v)}.`);
  }
  return v;
}

export function checkNonNegativeInt(op: string, arg: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new QkValueError(op, arg, `must be a non-negative integer, got ${String(v)}.`);
  }
  return v;
}

/** A caller's scratch tensor (a `workspace` option of a CUDA op): a live CUDA u8 tensor of at least `needed` bytes. */
export function checkWorkspace(op: string, workspace: Tensor, needed: number): void {
  checkTensor(op, 'workspace', workspace);
  if (workspace.device !== 'cuda') {
    throw new QkDeviceError('argument "workspace" must be a CUDA tensor like the inputs.', op);
  }
  if (workspace.dtype !== 'u8') {
    throw new QkDtypeError({ op, arg: 'workspace', expected: 'u8', got: workspace.dtype });
  }
  if (workspace.nbytes < needed) {
    throw new QkValueError(
      op,
      'workspace',
      `holds ${workspace.nbytes} bytes but these sizes need ${needed}: allocate it for the largest call.`,
    );
  }
}
