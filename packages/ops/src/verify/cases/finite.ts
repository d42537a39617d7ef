/**
 * Verify cases of findNonFinite (the load-time weight check): NaN, +Inf and -Inf planted at seeded places (the first
 * and last element among them) in seeded finite bit patterns, at every float dtype; clean tensors (nothing to find);
 * views one element into their buffer, whose unaligned head and tail the kernel reads element by element; and a
 * tensor of a Qwen3 embedding's size. The output is the kernel's i32 [4] (count and first index as two u64).
 */

import { cudaNonFiniteStats } from '../../cuda/elementwise.js';
import type { FloatDType } from '../../dtype.js';
import { nonFiniteStats } from '../../ops/finite.js';
import { Rng } from '../../random.js';
import { Tensor } from '../../tensor.js';
import { toleranceFor } from '../../testing/tolerances.js';
import type { VerifyCase } from '../types.js';
import { dims, ODD_WIDTHS, VERIFY_DTYPES, xorshift32 } from './shapes.js';

type Tag = VerifyCase['tag'];

/** Bit patterns of NaN, +Inf and -Inf per dtype (f32 as numbers). */
const SPECIALS: Record<FloatDType, readonly number[]> = {
  f32: [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY],
  f16: [0x7e00, 0x7c00, 0xfc00],
  bf16: [0x7fc0, 0x7f80, 0xff80],
};

/** `size` seeded finite values (random bits with the exponent kept below all-ones), `planted` specials among them. */
function plantedStorage(
  dtype: FloatDType,
  size: number,
  planted: number,
  seed: number,
): Float32Array | Uint16Array {
  const rng = new Rng(seed);
  const next = xorshift32(rng.nextU32());
  let storage: Float32Array | Uint16Array;
  if (dtype === 'f32') {
    const bits = new Uint32Array(size);
    // Exponent 0..253 (never 255): finite, subnormals and zeros included.
    for (let i = 0; i < size; i++) bits[i] = ((next() & 0x807fffff) | ((next() % 254) << 23)) >>> 0;
    storage = new Float32Array(bits.buffer);
  } else {
    const half = new Uint16Array(size);
    const [top, shift] = dtype === 'bf16' ? [255, 7] : [31, 10];
    const mant = (1 << shift) - 1;
    for (let i = 0; i < size; i++) {
      const r = next();
      half[i] = (r & 0x8000) | (((r >>> 16) % top) << shift) | (r & mant);
    }
    storage = half;
  }
  const specials = SPECIALS[dtype];
  for (let k = 0; k < planted; k++) {
    // The first and the last element get one each; the rest land anywhere (repeats allowed).
    const at = k === 0 ? 0 : k === 1 ? size - 1 : rng.nextInt(size);
    storage[at] = specials[rng.nextInt(specials.length)]!;
  }
  return storage;
}

/** The kernel's output layout from the reference: count, first (all ones when none), each as two u32 words. */
function encodeStats(stats: { count: number; first: number }): Tensor<'i32'> {
  const words = new Int32Array(4);
  words[0] = (stats.count % 2 ** 32) | 0;
  words[1] = Math.floor(stats.count / 2 ** 32) | 0;
  if (stats.first < 0) {
    words[2] = -1;
    words[3] = -1;
  } else {
    words[2] = (stats.first % 2 ** 32) | 0;
    words[3] = Math.floor(stats.first / 2 ** 32) | 0;
  }
  return Tensor.fromStorage(words, [4], 'i32');
}

function findCase(
  dtype: FloatDType,
  size: number,
  planted: number,
  tag: Tag,
  misaligned = false,
): VerifyCase {
  const label = `${dims(size)} ${planted === 0 ? 'clean' : `${planted} planted`}${misaligned ? ' misaligned' : ''}`;
  return {
    op: 'findNonFinite',
    dtype,
    shape: label,
    tag,
    tolerance: toleranceFor('findNonFinite', dtype),
    make(seed) {
      // A misaligned case plants in the view (one element into the buffer); element 0 of the buffer is NaN, which
      // the view must not see.
      const total = size + (misaligned ? 1 : 0);
      const body = plantedStorage(dtype, size, planted, seed);
      let storage = body;
      if (misaligned) {
        storage = dtype === 'f32' ? new Float32Array(total) : new Uint16Array(total);
        storage.set(body, 1);
        storage[0] = SPECIALS[dtype][0]!;
      }
      const x = Tensor.fromStorage(storage, [total], dtype);
      return {
        inputs: [x],
        expected: [encodeStats(nonFiniteStats(body, dtype))],
        run: ([gx], [out]) => {
          const view = misaligned ? gx!.slice(1, total) : gx!;
          try {
            cudaNonFiniteStats('findNonFinite', view as Tensor<FloatDType>, out!);
          } finally {
            if (view !== gx) view.dispose();
          }
        },
      };
    },
  };
}

function casesFor(dtype: FloatDType): VerifyCase[] {
  return [
    ...ODD_WIDTHS.map((n) => findCase(dtype, n, n > 2 ? 3 : 1, 'odd')),
    findCase(dtype, 4097, 0, 'odd'),
    findCase(dtype, 1_000_003, 17, 'odd'),
    findCase(dtype, 33, 2, 'edge', true),
    findCase(dtype, 1_000_003, 5, 'edge', true),
    findCase(dtype, 1_000_003, 0, 'edge', true),
  ];
}

export const FINITE_CASES: VerifyCase[] = [
  ...VERIFY_DTYPES.flatMap(casesFor),
  // A Qwen3-0.6B embedding's size (151936 × 1024), clean and with two planted.
  findCase('bf16', 151_936 * 1024, 0, 'qwen3-0.6b'),
  findCase('bf16', 151_936 * 1024, 2, 'qwen3-0.6b'),
];
