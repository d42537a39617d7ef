/** Editing a safetensors file's tensor data in place, for tests that corrupt a checkpoint on purpose. */
import { readFile, writeFile } from 'node:fs/promises';

/**
 * Rewrites tensor `name` of the safetensors file `file`: `edit` gets a view of the whole file, the byte offset at
 * which the tensor's data starts, and its length in bytes; the file is written back afterwards.
 */
export async function editTensorBytes(
  file: string,
  name: string,
  edit: (view: DataView, at: number, byteLength: number) => void,
): Promise<void> {
  const bytes = new Uint8Array(await readFile(file));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const [begin, end] = header[name].data_offsets as [number, number];
  edit(view, 8 + headerLength + begin, end - begin);
  await writeFile(file, bytes);
}
