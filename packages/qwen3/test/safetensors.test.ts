import { mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QkAbortError, QkCheckpointError } from '../src/errors.js';
import { openCheckpoint } from '../src/safetensors/checkpoint.js';
import type { SafetensorsDType } from '../src/safetensors/format.js';
import { openSafetensors } from '../src/safetensors/reader.js';
import { type WritableTensor, writeSafetensors, writeShardedSafetensors } from '../src/safetensors/writer.js';

let root: string;
let counter = 0;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-safetensors-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
const fresh = (name: string) => join(root, `${counter++}-${name}`);

const ELEMENT_BYTES: Record<string, number> = {
  BF16: 2,
  F16: 2,
  F32: 4,
  F64: 8,
  I8: 1,
  U8: 1,
  I16: 2,
  I32: 4,
  I64: 8,
  BOOL: 1,
};

function randomBytes(rng: Rng, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.nextInt(256);
  return out;
}

function randomShape(rng: Rng): number[] {
  const rank = rng.nextInt(4);
  return Array.from({ length: rank }, () => rng.nextInt(7));
}

/** An independent encoder: exactly the bytes the format describes, with optional deliberate damage. */
async function handMade(
  path: string,
  header: unknown,
  data: Uint8Array,
  options: { lengthOverride?: bigint; rawHeader?: Uint8Array } = {},
): Promise<string> {
  const json = options.rawHeader ?? new TextEncoder().encode(JSON.stringify(header));
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, options.lengthOverride ?? BigInt(json.length), true);
  const out = new Uint8Array(8 + json.length + data.length);
  out.set(prefix, 0);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  await writeFile(path, out);
  return path;
}

async function openError(path: string): Promise<QkCheckpointError> {
  try {
    const f = await openSafetensors(path);
    await f.close();
  } catch (e) {
    expect(e).toBeInstanceOf(QkCheckpointError);
    expect((e as Error).message).toContain(path);
    return e as QkCheckpointError;
  }
  throw new Error(`expected ${path} to be refused`);
}

describe('writeSafetensors + openSafetensors', () => {
  it('round-trips random tensors of every dtype, including scalars and empty tensors', async () => {
    const rng = new Rng(7);
    const dtypes = Object.keys(ELEMENT_BYTES) as SafetensorsDType[];
    const tensors = Array.from({ length: 30 }, (_, i) => {
      const dtype = dtypes[rng.nextInt(dtypes.length)]!;
      const shape = i === 0 ? [] : i === 1 ? [0, 5] : randomShape(rng);
      const n = shape.reduce((a, b) => a * b, 1) * ELEMENT_BYTES[dtype]!;
      return { name: `t.${i}.${rng.nextU32().toString(36)}`, dtype, shape, bytes: randomBytes(rng, n) };
    });
    const path = fresh('round.safetensors');
    await writeSafetensors(path, tensors, { metadata: { format: 'pt', note: 'qk' } });
    const file = await openSafetensors(path);
    expect(file.metadata).toEqual({ format: 'pt', note: 'qk' });
    expect([...file.tensors.keys()]).toEqual(tensors.map((t) => t.name));
    for (const t of [...tensors].reverse()) {
      const got = await file.readTensor(t.name);
      expect(got.dtype).toBe(t.dtype);
      expect(got.shape).toEqual(t.shape);
      expect(got.bytes).toEqual(t.bytes);
      expect(got.bytes.byteOffset).toBe(0);
    }
    await file.close();
    await expect(file.readTensor(tensors[3]!.name)).rejects.toThrow(/closed/);
  });

  it('lays the file out as the format says: u64 LE length, JSON padded with spaces to 8, contiguous data', async () => {
    const rng = new Rng(11);
    const tensors = [3, 1, 5].map((n, i) => ({
      name: `w${i}`,
      dtype: 'BF16' as const,
      shape: [n],
      bytes: randomBytes(rng, 2 * n),
    }));
    const path = fresh('layout.safetensors');
    await writeSafetensors(path, tensors);
    const raw = new Uint8Array(await readFile(path));
    const headerLength = Number(new DataView(raw.buffer).getBigUint64(0, true));
    expect(headerLength % 8).toBe(0);
    const headerText = new TextDecoder().decode(raw.subarray(8, 8 + headerLength));
    expect(headerText.trimEnd().length).toBeLessThan(headerText.length + 1);
    expect(/^\{.*\} *$/s.test(headerText)).toBe(true);
    const header = JSON.parse(headerText);
    expect(header.__metadata__).toEqual({ format: 'pt' });
    expect(header.w0).toEqual({ dtype: 'BF16', shape: [3], data_offsets: [0, 6] });
    expect(header.w1).toEqual({ dtype: 'BF16', shape: [1], data_offsets: [6, 8] });
    expect(header.w2).toEqual({ dtype: 'BF16', shape: [5], data_offsets: [8, 18] });
    const data = raw.subarray(8 + headerLength);
    expect(data.length).toBe(18);
    expect(data.subarray(6, 8)).toEqual(tensors[1]!.bytes);
  });

  it('reads a file made by an independent encoder, in any header order', async () => {
    const rng = new Rng(3);
    const a = randomBytes(rng, 4 * 6);
    const b = randomBytes(rng, 2);
    const header = {
      b: { dtype: 'I16', shape: [], data_offsets: [24, 26] },
      __metadata__: { k: 'v' },
      a: { dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] },
    };
    const path = await handMade(fresh('hand.safetensors'), header, new Uint8Array([...a, ...b]));
    const f = await openSafetensors(path);
    expect([...f.tensors.keys()]).toEqual(['a', 'b']);
    expect((await f.readTensor('b')).bytes).toEqual(b);
    expect((await f.readTensor('a')).bytes).toEqual(a);
    await expect(f.readTensor('c')).rejects.toThrow(/no tensor named "c"/);
    await f.close();
  });

  it('reads a tensor without reading the rest of the file into memory', async () => {
    // A sparse 1 GiB tensor next to a small one: reading the small one must not touch the big one.
    const big = 2 ** 30;
    const header = {
      small: { dtype: 'U8', shape: [16], data_offsets: [0, 16] },
      big: { dtype: 'U8', shape: [big], data_offsets: [16, 16 + big] },
    };
    const path = fresh('sparse.safetensors');
    const json = new TextEncoder().encode(JSON.stringify(header));
    await handMade(
      path,
      header,
      Uint8Array.from({ length: 16 }, (_, i) => i + 1),
    );
    const handle = await open(path, 'r+');
    await handle.truncate(8 + json.length + 16 + big);
    await handle.close();
    const before = process.memoryUsage().arrayBuffers;
    const f = await openSafetensors(path);
    const small = await f.readTensor('small');
    expect(small.bytes).toEqual(Uint8Array.from({ length: 16 }, (_, i) => i + 1));
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 2 ** 20);
    await f.close();
    await rm(path);
  });

  it('streams from an async iterable source and checks it against the announced specs', async () => {
    const rng = new Rng(5);
    const specs = [
      { name: 'x', dtype: 'F16' as const, shape: [4, 3] },
      { name: 'y', dtype: 'F32' as const, shape: [2] },
    ];
    const data = specs.map((s) =>
      randomBytes(rng, s.shape.reduce((a, b) => a * b, 1) * (s.dtype === 'F16' ? 2 : 4)),
    );
    async function* entries() {
      for (const [i, s] of specs.entries()) yield { ...s, bytes: data[i]! };
    }
    const path = fresh('async.safetensors');
    const seen: number[] = [];
    await writeSafetensors(
      path,
      { specs, entries: entries() },
      { onProgress: (p) => seen.push(p.writtenBytes) },
    );
    expect(seen).toEqual([24, 32]);
    const f = await openSafetensors(path);
    expect((await f.readTensor('y')).bytes).toEqual(data[1]);
    await f.close();

    async function* swapped() {
      yield { ...specs[1]!, bytes: data[1]! };
    }
    const bad = fresh('swapped.safetensors');
    await expect(writeSafetensors(bad, { specs, entries: swapped() })).rejects.toThrow(
      /in the order of the specs/,
    );
    await expect(readdir(root)).resolves.not.toContain(bad.split('/').pop());
    expect((await readdir(root)).some((n) => n.endsWith('.partial'))).toBe(false);
  });

  it('refuses bytes of the wrong length, duplicate names and unknown dtypes, leaving no file', async () => {
    const path = fresh('bad.safetensors');
    await expect(
      writeSafetensors(path, [{ name: 'a', dtype: 'F32', shape: [3], bytes: new Uint8Array(8) }]),
    ).rejects.toThrow(/needs 12 bytes, got 8/);
    const one = { name: 'a', dtype: 'U8' as const, shape: [1], bytes: new Uint8Array(1) };
    await expect(writeSafetensors(path, [one, one])).rejects.toThrow(/appears twice/);
    await expect(
      writeSafetensors(path, [
        { name: 'a', dtype: 'Q4' as SafetensorsDType, shape: [1], bytes: new Uint8Array(1) },
      ]),
    ).rejects.toThrow(/unknown dtype "Q4"/);
    expect((await readdir(root)).filter((n) => n.includes('bad.safetensors'))).toEqual([]);
  });

  it('stops between tensors on abort and removes the partial file', async () => {
    const controller = new AbortController();
    const tensors: WritableTensor[] = Array.from({ length: 5 }, (_, i) => ({
      name: `t${i}`,
      dtype: 'U8',
      shape: [10],
      bytes: () => {
        if (i === 2) controller.abort(new Error('user stop'));
        return new Uint8Array(10).fill(i);
      },
    }));
    const path = fresh('abort.safetensors');
    const err = await writeSafetensors(path, tensors, { signal: controller.signal }).catch((e) => e);
    expect(err).toBeInstanceOf(QkAbortError);
    expect(err.message).toContain('user stop');
    expect((await readdir(root)).filter((n) => n.includes('abort.safetensors'))).toEqual([]);
  });
});

describe('openSafetensors refuses corrupted files, naming the file and the tensor', () => {
  const good = {
    a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
    b: { dtype: 'U8', shape: [3], data_offsets: [8, 11] },
  };
  const data = new Uint8Array(11).fill(7);

  it('a file shorter than the length prefix', async () => {
    const path = fresh('short.safetensors');
    await writeFile(path, new Uint8Array(5));
    expect((await openError(path)).message).toMatch(/5 bytes, fewer than the 8-byte header length/);
  });

  it('a truncated file (header length past the end of file)', async () => {
    const path = await handMade(fresh('trunc.safetensors'), good, data);
    const raw = await readFile(path);
    await writeFile(path, raw.subarray(0, 20));
    expect((await openError(path)).message).toMatch(/header claims \d+ bytes but only 12 follow/);
    const huge = await handMade(fresh('huge.safetensors'), good, data, { lengthOverride: 2n ** 62n });
    expect((await openError(huge)).message).toMatch(/header claims 4611686018427387904 bytes/);
  });

  it('a header that is not UTF-8 JSON object', async () => {
    const notJson = await handMade(fresh('notjson.safetensors'), null, new Uint8Array(), {
      rawHeader: new TextEncoder().encode('{"a": [1, 2'),
    });
    expect((await openError(notJson)).message).toMatch(/not valid JSON/);
    const notUtf8 = await handMade(fresh('utf8.safetensors'), null, new Uint8Array(), {
      rawHeader: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]),
    });
    expect((await openError(notUtf8)).message).toMatch(/not valid UTF-8/);
    const array = await handMade(fresh('array.safetensors'), [1, 2], new Uint8Array());
    expect((await openError(array)).message).toMatch(/does not start with "\{"/);
    const badMeta = await handMade(fresh('meta.safetensors'), { ...good, __metadata__: { n: 1 } }, data);
    expect((await openError(badMeta)).message).toMatch(/__metadata__ must map strings to strings/);
  });

  it('an unknown dtype', async () => {
    const path = await handMade(
      fresh('dtype.safetensors'),
      { ...good, b: { ...good.b, dtype: 'Q4_K' } },
      data,
    );
    expect((await openError(path)).message).toMatch(/tensor "b" has unknown dtype "Q4_K"/);
  });

  it('a shape whose size disagrees with its byte span', async () => {
    const path = await handMade(fresh('shape.safetensors'), { ...good, a: { ...good.a, shape: [3] } }, data);
    expect((await openError(path)).message).toMatch(
      /tensor "a" \(F32 \[3\]\) needs 12 bytes but its data_offsets \[0, 8\] span 8/,
    );
    const neg = await handMade(fresh('neg.safetensors'), { ...good, a: { ...good.a, shape: [-2] } }, data);
    expect((await openError(neg)).message).toMatch(/tensor "a" has shape \[-2\]/);
    const offsets = await handMade(
      fresh('offs.safetensors'),
      { ...good, a: { ...good.a, data_offsets: [8, 0] } },
      data,
    );
    expect((await openError(offsets)).message).toMatch(/tensor "a" has data_offsets \[8,0\]/);
  });

  it('overlapping spans, holes, spans past the end and trailing bytes', async () => {
    const overlap = {
      a: { dtype: 'U8', shape: [6], data_offsets: [0, 6] },
      b: { dtype: 'U8', shape: [6], data_offsets: [4, 10] },
    };
    const o = await handMade(fresh('overlap.safetensors'), overlap, new Uint8Array(10));
    expect((await openError(o)).message).toMatch(/tensor "b" \[4, 10\) overlaps tensor "a"/);
    const hole = {
      a: { dtype: 'U8', shape: [4], data_offsets: [0, 4] },
      b: { dtype: 'U8', shape: [4], data_offsets: [6, 10] },
    };
    const h = await handMade(fresh('hole.safetensors'), hole, new Uint8Array(10));
    expect((await openError(h)).message).toMatch(
      /tensor "b" starts at 6 but the previous tensor "a" ends at 4/,
    );
    const past = await handMade(fresh('past.safetensors'), good, data.subarray(0, 9));
    expect((await openError(past)).message).toMatch(/tensor "b" spans bytes \[8, 11\).*holds only 9 bytes/);
    const trailing = await handMade(fresh('trailing.safetensors'), good, new Uint8Array(15));
    expect((await openError(trailing)).message).toMatch(/cover 11 bytes but the data section holds 15/);
  });

  it('a missing file or a directory', async () => {
    expect((await openError(fresh('nope.safetensors'))).message).toMatch(/no such file/);
    const dir = fresh('dir.safetensors');
    await mkdir(dir);
    expect((await openError(dir)).message).toMatch(/not a regular file|cannot open/);
  });
});

describe('sharded checkpoints', () => {
  function tensorsFor(rng: Rng, count: number): (WritableTensor & { bytes: Uint8Array })[] {
    return Array.from({ length: count }, (_, i) => {
      const shape = [1 + rng.nextInt(20), 1 + rng.nextInt(20)];
      return {
        name: `layer.${i}.w`,
        dtype: 'BF16' as const,
        shape,
        bytes: randomBytes(rng, shape[0]! * shape[1]! * 2),
      };
    });
  }

  it('writes one model.safetensors under the bound, shards and an index above it', async () => {
    const rng = new Rng(99);
    const tensors = tensorsFor(rng, 12);
    const total = tensors.reduce((s, t) => s + t.bytes.length, 0);

    const single = fresh('single');
    const one = await writeShardedSafetensors(single, tensors, { maxShardBytes: total });
    expect(await readdir(single)).toEqual(['model.safetensors']);
    expect(one.index).toBeUndefined();

    const dir = fresh('sharded');
    const maxShardBytes = Math.ceil(total / 4);
    const result = await writeShardedSafetensors(dir, tensors, { maxShardBytes });
    const files = (await readdir(dir)).sort();
    const n = result.files.length;
    expect(n).toBeGreaterThanOrEqual(4);
    const shardNames = Array.from(
      { length: n },
      (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`,
    );
    expect(files).toEqual([...shardNames, 'model.safetensors.index.json'].sort());
    const index = JSON.parse(await readFile(join(dir, 'model.safetensors.index.json'), 'utf8'));
    expect(index.metadata.total_size).toBe(total);
    // Check the index against the shards' own headers, parsed here independently of the reader.
    for (const shard of shardNames) {
      const raw = new Uint8Array(await readFile(join(dir, shard)));
      const len = Number(new DataView(raw.buffer).getBigUint64(0, true));
      const header = JSON.parse(new TextDecoder().decode(raw.subarray(8, 8 + len)));
      const names = Object.keys(header).filter((k) => k !== '__metadata__');
      const size = names.reduce((s, k) => s + header[k].data_offsets[1] - header[k].data_offsets[0], 0);
      expect(size <= maxShardBytes || names.length === 1).toBe(true);
      for (const name of names) expect(index.weight_map[name]).toBe(shard);
    }
    expect(Object.keys(index.weight_map).sort()).toEqual(tensors.map((t) => t.name).sort());

    const checkpoint = await openCheckpoint(dir);
    expect(checkpoint.files.map((f) => f.split('/').pop())).toEqual(shardNames);
    for (const t of tensors) expect((await checkpoint.readTensor(t.name)).bytes).toEqual(t.bytes);
    await checkpoint.close();
  });

  async function shardedDir(name: string): Promise<{ dir: string; index: Record<string, string> }> {
    const dir = fresh(name);
    const tensors = tensorsFor(new Rng(1234), 6);
    await writeShardedSafetensors(dir, tensors, { maxShardBytes: 1 });
    const index = JSON.parse(await readFile(join(dir, 'model.safetensors.index.json'), 'utf8')).weight_map;
    return { dir, index };
  }

  async function checkpointError(dir: string): Promise<string> {
    const err = await openCheckpoint(dir).then(
      async (c) => {
        await c.close();
        return undefined;
      },
      (e) => e,
    );
    expect(err).toBeInstanceOf(QkCheckpointError);
    return (err as Error).message;
  }

  it('refuses a missing shard, naming it', async () => {
    const { dir } = await shardedDir('missing-shard');
    await rm(join(dir, 'model-00003-of-00006.safetensors'));
    expect(await checkpointError(dir)).toMatch(
      /lists shard model-00003-of-00006\.safetensors that is not in/,
    );
  });

  it('refuses a tensor in another shard than the index says', async () => {
    const { dir, index } = await shardedDir('wrong-shard');
    // Swap two tensors' shards so both files are still listed.
    index['layer.0.w'] = 'model-00002-of-00006.safetensors';
    index['layer.1.w'] = 'model-00001-of-00006.safetensors';
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: index }));
    const message = await checkpointError(dir);
    expect(message).toContain(
      'tensor "layer.0.w" is in model-00001-of-00006.safetensors but the weight_map says model-00002-of-00006.safetensors',
    );
    expect(message).toContain(
      'tensor "layer.1.w" is in model-00002-of-00006.safetensors but the weight_map says model-00001-of-00006.safetensors',
    );
    expect(message).toContain('model.safetensors.index.json');
  });

  it('refuses an index that lists a tensor no shard holds, or omits one a shard holds', async () => {
    const { dir, index } = await shardedDir('unlisted');
    const indexPath = join(dir, 'model.safetensors.index.json');
    await writeFile(
      indexPath,
      JSON.stringify({ weight_map: { ...index, ghost: 'model-00002-of-00006.safetensors' } }),
    );
    expect(await checkpointError(dir)).toContain(
      'tensor "ghost" is not in model-00002-of-00006.safetensors where the weight_map says it is',
    );
    const two = fresh('omitted');
    await mkdir(two);
    const bytes = new Uint8Array(2);
    await writeSafetensors(join(two, 'a.safetensors'), [
      { name: 'w', dtype: 'U8', shape: [2], bytes },
      { name: 'v', dtype: 'U8', shape: [2], bytes },
    ]);
    await writeFile(
      join(two, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { w: 'a.safetensors' } }),
    );
    expect(await checkpointError(two)).toContain('tensor "v" is in a.safetensors but not in the weight_map');
  });

  it('refuses a tensor present in two shards', async () => {
    const dir = fresh('dup');
    await mkdir(dir);
    const bytes = new Uint8Array(4);
    await writeSafetensors(join(dir, 'a.safetensors'), [{ name: 'w', dtype: 'U8', shape: [4], bytes }]);
    await writeSafetensors(join(dir, 'b.safetensors'), [
      { name: 'w', dtype: 'U8', shape: [4], bytes },
      { name: 'v', dtype: 'U8', shape: [4], bytes },
    ]);
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { w: 'a.safetensors', v: 'b.safetensors' } }),
    );
    expect(await checkpointError(dir)).toMatch(/tensor "w" is in both a\.safetensors and b\.safetensors/);
  });

  it('refuses a bad index: not JSON, no weight_map, a path outside the directory', async () => {
    const { dir } = await shardedDir('bad-index');
    const indexPath = join(dir, 'model.safetensors.index.json');
    await writeFile(indexPath, '{"weight_map": ');
    expect(await checkpointError(dir)).toMatch(/is not valid JSON/);
    await writeFile(indexPath, '{"metadata": {}}');
    expect(await checkpointError(dir)).toMatch(/no "weight_map" object/);
    await writeFile(indexPath, JSON.stringify({ weight_map: { 'layer.0.w': '../elsewhere.safetensors' } }));
    expect(await checkpointError(dir)).toMatch(/not a file name in the checkpoint directory/);
  });

  it('says what it looked for when a directory has no checkpoint', async () => {
    expect(await checkpointError(fresh('absent'))).toMatch(/no such directory/);
    const empty = fresh('empty');
    await mkdir(empty);
    expect(await checkpointError(empty)).toMatch(
      /neither model\.safetensors nor model\.safetensors\.index\.json/,
    );
    await writeSafetensors(join(empty, 'consolidated.safetensors'), []);
    expect(await checkpointError(empty)).toMatch(/it has consolidated\.safetensors/);
  });

  it('opens a .safetensors path directly', async () => {
    const path = fresh('direct.safetensors');
    const bytes = new Uint8Array([1, 2, 3]);
    await writeSafetensors(path, [{ name: 'z', dtype: 'I8', shape: [3], bytes }]);
    const c = await openCheckpoint(path);
    expect((await c.readTensor('z')).bytes).toEqual(bytes);
    expect(c.tensors.get('z')?.file).toBe(path);
    await c.close();
  });
});
