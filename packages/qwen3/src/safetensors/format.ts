/**
 * The safetensors layout: an 8-byte little-endian header length, a JSON header mapping tensor names to dtype,
 * shape and `[begin, end)` byte offsets into the data section that follows, then the data. This module validates
 * a header against the size of its data section and builds headers for the writer; it does no I/O.
 */
import type { FloatDType } from '@qk/ops';
import { QkCheckpointError, QkLimitError } from '../errors.js';
import { checkJsonDepth, describeValue, jsonErrorMessage, LIMITS, quote } from '../untrusted.js';

/** Element types the safetensors format names. Only BF16, F16 and F32 can be loaded as model weights. */
export type SafetensorsDType =
  | 'BOOL'
  | 'U8'
  | 'I8'
  | 'I16'
  | 'U16'
  | 'F16'
  | 'BF16'
  | 'I32'
  | 'U32'
  | 'F32'
  | 'F64'
  | 'I64'
  | 'U64'
  | 'F8_E4M3'
  | 'F8_E5M2';

/** Bytes per element of each safetensors dtype. */
export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<SafetensorsDType, number>> = Object.freeze({
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
});

const TO_FLOAT: Readonly<Partial<Record<SafetensorsDType, FloatDType>>> = {
  BF16: 'bf16',
  F16: 'f16',
  F32: 'f32',
};
const FROM_FLOAT: Readonly<Record<FloatDType, SafetensorsDType>> = { bf16: 'BF16', f16: 'F16', f32: 'F32' };

/** Whether `value` names a safetensors dtype. */
export function isSafetensorsDType(value: unknown): value is SafetensorsDType {
  return typeof value === 'string' && Object.hasOwn(SAFETENSORS_DTYPE_BYTES, value);
}

/** Our float dtype for a loadable safetensors dtype (BF16, F16, F32), else `undefined`. */
export function floatDTypeOf(dtype: SafetensorsDType): FloatDType | undefined {
  return TO_FLOAT[dtype];
}

/** The safetensors name of one of our float dtypes. */
export function safetensorsDTypeOf(dtype: FloatDType): SafetensorsDType {
  return FROM_FLOAT[dtype];
}

/** One tensor as the header describes it. */
export interface SafetensorsTensorInfo {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
  /** Byte offset of the first element from the start of the file (not of the data section). */
  readonly fileOffset: number;
  readonly byteLength: number;
}

/** A tensor's bytes as read from a file: little-endian elements of `dtype`, in a buffer of their own. */
export interface RawTensor {
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
  /** Starts at offset 0 of its own `ArrayBuffer`, so it can be viewed as a `Uint16Array` or `Float32Array`. */
  readonly bytes: Uint8Array;
}

/** The parsed, validated header of a safetensors file. */
export interface SafetensorsHeader {
  readonly metadata: Readonly<Record<string, string>>;
  /** In file order (ascending offsets). */
  readonly tensors: ReadonlyMap<string, SafetensorsTensorInfo>;
}

/** Headers above this are refused before allocating: the reference implementation uses the same bound. */
export const MAX_HEADER_BYTES = 100_000_000;

/** Elements of `shape`, or `undefined` when it is not a list of non-negative integers or overflows 2^53. */
export function elementCount(shape: unknown): number | undefined {
  if (!Array.isArray(shape)) return undefined;
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) return undefined;
    n *= d;
    if (!Number.isSafeInteger(n)) return undefined;
  }
  return n;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses and validates a header. `headerBytes` is the JSON (padding included) and `dataBytes` the length of the
 * data section that follows it in the file.
 *
 * @throws QkCheckpointError naming `file` and the offending tensor when the header is not UTF-8 JSON, names an
 *   unknown dtype, has a shape whose size disagrees with its byte span, or has spans that leave the data section,
 *   overlap, or leave holes.
 */
export function parseHeader(
  headerBytes: Uint8Array,
  dataStart: number,
  dataBytes: number,
  file: string,
): SafetensorsHeader {
  const fail = (message: string): never => {
    throw new QkCheckpointError(message, file);
  };
  let text: string;
  try {
    text = fatalUtf8.decode(headerBytes);
  } catch {
    return fail(
      'the safetensors header is not valid UTF-8; the file is corrupted or not a safetensors file.',
    );
  }
  if (!text.startsWith('{')) {
    fail('the safetensors header does not start with "{"; the file is corrupted or not a safetensors file.');
  }
  checkJsonDepth(text, file, 4);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    fail(
      `the safetensors header is not valid JSON (${jsonErrorMessage(e)}); the file is corrupted or truncated.`,
    );
  }
  if (!isPlainObject(json)) return fail('the safetensors header must be a JSON object.');
  const entries = Object.keys(json).length - (json.__metadata__ === undefined ? 0 : 1);
  if (entries > LIMITS.tensors) {
    throw new QkLimitError(file, 'the header', `${LIMITS.tensors} tensors`, `lists ${entries} tensors`);
  }

  let metadata: Record<string, string> = {};
  const rawMetadata = json.__metadata__;
  if (rawMetadata !== undefined) {
    if (!isPlainObject(rawMetadata) || !Object.values(rawMetadata).every((v) => typeof v === 'string')) {
      fail('__metadata__ must map strings to strings.');
    }
    metadata = Object.freeze({ ...(rawMetadata as Record<string, string>) });
  }

  const spans: { name: string; begin: number; end: number; info: SafetensorsTensorInfo }[] = [];
  for (const [name, entry] of Object.entries(json)) {
    if (name === '__metadata__') continue;
    const where = `tensor ${quote(name)}`;
    if (!isPlainObject(entry))
      fail(`${where}: its header entry must be an object with dtype, shape and data_offsets.`);
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    if (!isSafetensorsDType(dtype)) {
      fail(
        `${where} has unknown dtype ${describeValue(dtype)}; known: ${Object.keys(SAFETENSORS_DTYPE_BYTES).join(', ')}.`,
      );
    }
    if (Array.isArray(shape) && shape.length > LIMITS.tensorRank) {
      fail(`${where} has ${shape.length} dimensions; qk reads tensors of at most ${LIMITS.tensorRank}.`);
    }
    const count = elementCount(shape);
    if (count === undefined)
      fail(`${where} has shape ${describeValue(shape)}, not a list of non-negative integers.`);
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) ||
      offsets[0] > offsets[1]
    ) {
      fail(
        `${where} has data_offsets ${describeValue(offsets)}, expected [begin, end] with 0 <= begin <= end.`,
      );
    }
    const [begin, end] = offsets as [number, number];
    const expected = count! * SAFETENSORS_DTYPE_BYTES[dtype as SafetensorsDType];
    if (end - begin !== expected) {
      fail(
        `${where} (${dtype} ${describeValue(shape)}) needs ${expected} bytes but its data_offsets [${begin}, ${end}] span ${end - begin}; the header is corrupted.`,
      );
    }
    if (end > dataBytes) {
      fail(
        `${where} spans bytes [${begin}, ${end}) of the data section, which holds only ${dataBytes} bytes; the file is truncated or corrupted.`,
      );
    }
    const info: SafetensorsTensorInfo = Object.freeze({
      name,
      dtype: dtype as SafetensorsDType,
      shape: Object.freeze([...(shape as number[])]),
      fileOffset: dataStart + begin,
      byteLength: end - begin,
    });
    spans.push({ name, begin, end, info });
  }

  // The format requires the spans to tile the data section exactly: anything else is corruption or a smuggled payload.
  spans.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  let previous: string | undefined;
  for (const span of spans) {
    if (span.begin < cursor) {
      fail(
        `tensor ${quote(span.name)} [${span.begin}, ${span.end}) overlaps tensor ${quote(previous ?? '')} which ends at ${cursor}; the header is corrupted.`,
      );
    }
    if (span.begin > cursor) {
      fail(
        `tensor ${quote(span.name)} starts at ${span.begin} but the previous tensor${previous === undefined ? '' : ` ${quote(previous)}`} ends at ${cursor}, leaving a hole in the data section; the header is corrupted.`,
      );
    }
    cursor = span.end;
    previous = span.name;
  }
  if (cursor !== dataBytes) {
    fail(
      `the tensors cover ${cursor} bytes but the data section holds ${dataBytes}; the file has trailing bytes or a corrupted header.`,
    );
  }
  return Object.freeze({ metadata, tensors: new Map(spans.map((s) => [s.name, s.info])) });
}

/** What the writer needs to know about a tensor before any of its bytes exist. */
export interface TensorSpec {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
}

/** Bytes of a tensor described by `spec`. */
export function specByteLength(spec: TensorSpec): number {
  const count = elementCount(spec.shape);
  if (count === undefined) {
    throw new QkCheckpointError(
      `cannot write tensor ${quote(spec.name)}: shape ${describeValue(spec.shape)} is not a list of non-negative integers.`,
    );
  }
  if (!isSafetensorsDType(spec.dtype)) {
    throw new QkCheckpointError(
      `cannot write tensor ${quote(spec.name)}: unknown dtype ${describeValue(spec.dtype)}.`,
    );
  }
  return count * SAFETENSORS_DTYPE_BYTES[spec.dtype];
}

/**
 * The 8-byte length prefix and JSON header for `specs` laid out in order, padded with spaces to a multiple of 8
 * bytes so the data section starts aligned, as the reference writer does.
 */
export function encodeHeader(
  specs: readonly TensorSpec[],
  metadata: Readonly<Record<string, string>>,
): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  const seen = new Set<string>();
  let offset = 0;
  for (const spec of specs) {
    if (spec.name === '__metadata__' || seen.has(spec.name)) {
      throw new QkCheckpointError(
        `cannot write tensor ${quote(spec.name)}: ${seen.has(spec.name) ? 'the name appears twice' : 'the name is reserved'}.`,
      );
    }
    seen.add(spec.name);
    const bytes = specByteLength(spec);
    header[spec.name] = { dtype: spec.dtype, shape: [...spec.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + padded).fill(0x20, 8 + json.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, 8);
  return out;
}
