/**
 * Reading one safetensors file: the header is validated in full when the file is opened, and each tensor is then
 * read on its own with positioned reads, so a model never has to fit in the JS heap at once.
 */
import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { QkCheckpointError } from '../errors.js';
import { inspectPath, notReadableReason, quote } from '../untrusted.js';
import {
  MAX_HEADER_BYTES,
  parseHeader,
  type RawTensor,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from './format.js';

/** An open safetensors file. Close it with `close()` (or `await using`). */
export interface SafetensorsFile {
  readonly path: string;
  /** The header's `__metadata__` (e.g. `{ format: 'pt' }`). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Every tensor, in file order. */
  readonly tensors: ReadonlyMap<string, SafetensorsTensorInfo>;
  /** Size of the file in bytes. */
  readonly fileBytes: number;
  /**
   * Reads one tensor's bytes (and nothing else) into a fresh buffer.
   * @throws QkCheckpointError when the file has no such tensor, is closed, or has shrunk since it was opened.
   */
  readTensor(name: string): Promise<RawTensor>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Node refuses single reads above 2 GiB − 1; larger tensors (an f32 embedding of a big model) read in pieces. */
const MAX_READ_BYTES = 1 << 30;

/** Fills `target` from `position`, failing with a clear message when the file ends first. */
async function readFully(
  handle: FileHandle,
  target: Uint8Array,
  position: number,
  file: string,
): Promise<void> {
  let done = 0;
  while (done < target.length) {
    const length = Math.min(target.length - done, MAX_READ_BYTES);
    const { bytesRead } = await handle.read(target, done, length, position + done);
    if (bytesRead === 0) {
      throw new QkCheckpointError(
        `the file ended at byte ${position + done} while reading ${target.length} bytes at ${position}; it was truncated (or changed since it was opened).`,
        file,
      );
    }
    done += bytesRead;
  }
}

async function readHeader(handle: FileHandle, path: string, fileBytes: number): Promise<SafetensorsHeader> {
  if (fileBytes < 8) {
    throw new QkCheckpointError(
      `the file has ${fileBytes} bytes, fewer than the 8-byte header length every safetensors file starts with; it is truncated or not a safetensors file.`,
      path,
    );
  }
  const prefix = new Uint8Array(8);
  await readFully(handle, prefix, 0, path);
  const headerLength = new DataView(prefix.buffer).getBigUint64(0, true);
  if (headerLength > BigInt(fileBytes - 8)) {
    throw new QkCheckpointError(
      `the header claims ${headerLength} bytes but only ${fileBytes - 8} follow the length prefix; the file is truncated or not a safetensors file.`,
      path,
    );
  }
  if (headerLength > BigInt(MAX_HEADER_BYTES) || headerLength < 2n) {
    throw new QkCheckpointError(
      `the header claims ${headerLength} bytes, outside the sane range [2, ${MAX_HEADER_BYTES}]; the file is corrupted or not a safetensors file.`,
      path,
    );
  }
  const length = Number(headerLength);
  const headerBytes = new Uint8Array(length);
  await readFully(handle, headerBytes, 8, path);
  return parseHeader(headerBytes, 8 + length, fileBytes - 8 - length, path);
}

/**
 * Opens a safetensors file and validates its header before trusting any of it: the length prefix lies within the
 * file, the header is a UTF-8 JSON object, `__metadata__` maps strings to strings, every dtype is known, every
 * shape's size matches its byte span, and the spans tile the data section exactly (sorted, no overlap, no hole,
 * nothing past the end).
 *
 * @throws QkCheckpointError naming the file (and the tensor, where one is at fault).
 */
export async function openSafetensors(path: string): Promise<SafetensorsFile> {
  const info = await inspectPath(path);
  if (info.kind === 'missing') throw new QkCheckpointError('no such file.', path);
  if (info.kind !== 'file') throw new QkCheckpointError(`${notReadableReason(info)}.`, path);
  let handle: FileHandle;
  try {
    // O_NONBLOCK: should the file be swapped for a FIFO after the check, opening it must still not block.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new QkCheckpointError(
      code === 'ENOENT'
        ? 'no such file.'
        : `cannot open the file (${code ?? (e instanceof Error ? e.message : String(e))}).`,
      path,
    );
  }
  let header: SafetensorsHeader;
  let fileBytes: number;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new QkCheckpointError('is not a regular file.', path);
    fileBytes = stat.size;
    header = await readHeader(handle, path, fileBytes);
  } catch (e) {
    await handle.close();
    throw e;
  }
  let closed = false;
  const file: SafetensorsFile = {
    path,
    metadata: header.metadata,
    tensors: header.tensors,
    fileBytes,
    async readTensor(name: string): Promise<RawTensor> {
      const info = header.tensors.get(name);
      if (info === undefined) {
        throw new QkCheckpointError(
          `has no tensor named ${quote(name)} (it holds ${header.tensors.size}).`,
          path,
        );
      }
      if (closed) throw new QkCheckpointError(`is closed; cannot read tensor ${quote(name)}.`, path);
      const bytes = new Uint8Array(info.byteLength);
      await readFully(handle, bytes, info.fileOffset, path);
      return { dtype: info.dtype, shape: info.shape, bytes };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await handle.close();
    },
    [Symbol.asyncDispose](): Promise<void> {
      return file.close();
    },
  };
  return file;
}
