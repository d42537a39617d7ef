/**
 * `Rng` (PCG32-XSH-RR) against the published reference output and an independent BigInt implementation written
 * here; statistical checks of the derived distributions; `portableLog` against `Math.log`; and bit-identical
 * streams across processes.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { QkValueError, Rng, Tensor } from '../src/index.js';
import { portableLog } from '../src/random.js';
import { expectQkError } from './helpers.js';

const MASK64 = (1n << 64n) - 1n;
const MASK32 = 0xffffffffn;
const MULT = 6364136223846793005n;

/** PCG32-XSH-RR in BigInt, straight from the reference `pcg32_srandom_r` / `pcg32_random_r`. */
class RefPcg32 {
  state = 0n;
  readonly inc: bigint;

  constructor(seed: bigint, stream: bigint) {
    this.inc = ((stream << 1n) | 1n) & MASK64;
    this.step();
    this.state = (this.state + seed) & MASK64;
    this.step();
  }

  step(): void {
    this.state = (this.state * MULT + this.inc) & MASK64;
  }

  next(): number {
    const old = this.state;
    this.step();
    const xorshifted = (((old >> 18n) ^ old) >> 27n) & MASK32;
    const rot = old >> 59n;
    const rotated = ((xorshifted >> rot) | (xorshifted << ((32n - rot) & 31n))) & MASK32;
    return Number(rotated);
  }

  /** `pcg32_boundedrand_r`: reject the `2^32 mod n` smallest outputs, then reduce modulo n. */
  nextBounded(n: number): number {
    const threshold = 2 ** 32 % n;
    for (;;) {
      const r = this.next();
      if (r >= threshold) return r % n;
    }
  }
}

/** Polar-method normals from the reference generator, with the engine's Math.log. */
function refNormals(seed: bigint, stream: bigint, count: number): number[] {
  const g = new RefPcg32(seed, stream);
  const out: number[] = [];
  while (out.length < count) {
    const u = 2 * (g.next() / 2 ** 32) - 1;
    const v = 2 * (g.next() / 2 ** 32) - 1;
    const s = u * u + v * v;
    if (s > 0 && s < 1) {
      const f = Math.sqrt((-2 * Math.log(s)) / s);
      out.push(u * f, v * f);
    }
  }
  return out.slice(0, count);
}

/** Upper quantile of chi-square with `dof` degrees of freedom at normal quantile `z` (Wilson–Hilferty). */
function chiSquareQuantile(dof: number, z: number): number {
  const a = 2 / (9 * dof);
  return dof * (1 - a + z * Math.sqrt(a)) ** 3;
}

/** The normal quantile for an upper tail of 1e-6: a correct generator fails a check with that probability. */
const Z_1E6 = 4.753;

function chiSquare(counts: number[], expected: number): number {
  return counts.reduce((acc, c) => acc + (c - expected) ** 2 / expected, 0);
}

/** Spacing of float64 values at |y| (y normal, non-zero). */
function ulp(y: number): number {
  return 2 ** (Math.floor(Math.log2(Math.abs(y))) - 52);
}

function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

describe('Rng against PCG32 references', () => {
  it('reproduces the pcg32 reference demo output for seed 42, stream 54', () => {
    const rng = new Rng(42, 54);
    const first = Array.from({ length: 6 }, () => rng.nextU32());
    expect(first).toEqual([0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]);
    const ref = new RefPcg32(42n, 54n);
    expect(Array.from({ length: 6 }, () => ref.next())).toEqual(first);
  });

  const configs: [number | bigint, number | bigint][] = [
    [0, 0],
    [42, 54],
    [1, 1],
    [2 ** 32 - 1, 2 ** 31],
    [2 ** 32 + 7, 3],
    [2 ** 53 - 1, 2 ** 32 + 5],
    [0xdeadbeefcafebaben, 0x0123456789abcdefn],
    [MASK64, MASK64], // stream << 1 drops the top bit: inc = 2^64 − 1
    [123n, 1n << 63n],
  ];
  for (const [seed, stream] of configs) {
    it(`matches the BigInt implementation for 5000 outputs (seed ${seed}, stream ${stream})`, () => {
      const rng = new Rng(seed, stream);
      const ref = new RefPcg32(BigInt(seed), BigInt(stream));
      const bad: string[] = [];
      for (let i = 0; i < 5000; i++) {
        const got = rng.nextU32();
        const want = ref.next();
        if (got !== want) bad.push(`#${i}: ${got} vs ${want}`);
      }
      expect(bad.slice(0, 5)).toEqual([]);
    });
  }

  it('treats number and bigint seeds alike, defaults to seed 0 / stream 0, and separates streams', () => {
    const draw = (r: Rng) => Array.from({ length: 20 }, () => r.nextU32());
    expect(draw(new Rng(2 ** 40 + 3, 9))).toEqual(draw(new Rng(2n ** 40n + 3n, 9n)));
    expect(draw(new Rng())).toEqual(draw(new Rng(0, 0)));
    expect(draw(new Rng(5))).toEqual(draw(new Rng(5, 0)));
    expect(draw(new Rng(5, 1))).not.toEqual(draw(new Rng(5, 2)));
    expect(draw(new Rng(5))).not.toEqual(draw(new Rng(6)));
    // seeds that differ only above bit 32 must give different streams
    expect(draw(new Rng(7))).not.toEqual(draw(new Rng(2 ** 32 + 7)));
  });

  it('rejects invalid seeds and streams', () => {
    const bad: unknown[] = [-1, 1.5, Number.NaN, Infinity, 2 ** 53, -1n, 1n << 64n, '7', null];
    for (const v of bad) {
      expectQkError(() => new Rng(v as number), QkValueError, 'QK_VALUE', 'Rng', '"seed"');
      expectQkError(() => new Rng(0, v as number), QkValueError, 'QK_VALUE', 'Rng', '"stream"');
    }
    expect(() => new Rng(MASK64, MASK64)).not.toThrow();
    expect(() => new Rng(2 ** 53 - 1)).not.toThrow();
  });
});

describe('Rng.nextFloat', () => {
  it('is nextU32 / 2^32, in [0, 1)', () => {
    const rng = new Rng(77, 5);
    const ref = new RefPcg32(77n, 5n);
    const bad: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const x = rng.nextFloat();
      const want = ref.next() / 2 ** 32;
      if (x !== want || !(x >= 0 && x < 1)) bad.push(`#${i}: ${x} vs ${want}`);
    }
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it('is uniform: chi-square over 100 bins of 200k draws', () => {
    const rng = new Rng(8);
    const bins = new Array<number>(100).fill(0);
    const n = 200_000;
    for (let i = 0; i < n; i++) bins[Math.floor(rng.nextFloat() * 100)]!++;
    expect(chiSquare(bins, n / 100)).toBeLessThan(chiSquareQuantile(99, Z_1E6));
  });
});

describe('Rng.nextInt', () => {
  it('matches the reference bounded generator exactly', () => {
    for (const n of [1, 2, 3, 7, 10, 1000, 2 ** 31 + 1, 3 * 2 ** 30, 2 ** 32 - 1, 2 ** 32]) {
      const rng = new Rng(1234, n);
      const ref = new RefPcg32(1234n, BigInt(n));
      for (let i = 0; i < 500; i++) {
        const v = rng.nextInt(n);
        expect(v).toBe(ref.nextBounded(n));
        expect(Number.isInteger(v) && v >= 0 && v < n).toBe(true);
      }
    }
  });

  it('is unbiased: chi-square for n = 10', () => {
    const rng = new Rng(99);
    const n = 100_000;
    const counts = new Array<number>(10).fill(0);
    for (let i = 0; i < n; i++) counts[rng.nextInt(10)]!++;
    expect(chiSquare(counts, n / 10)).toBeLessThan(chiSquareQuantile(9, Z_1E6));
  });

  it('is unbiased where plain modulo would not be: n = 3·2^30', () => {
    // r mod 3·2^30 for uniform 32-bit r hits [0, 2^30) twice as often (1/2 instead of 1/3).
    const rng = new Rng(3);
    const n = 30_000;
    const thirds = [0, 0, 0];
    for (let i = 0; i < n; i++) thirds[Math.floor(rng.nextInt(3 * 2 ** 30) / 2 ** 30)]!++;
    expect(chiSquare(thirds, n / 3)).toBeLessThan(chiSquareQuantile(2, Z_1E6));
  });

  it('validates n', () => {
    const rng = new Rng(1);
    for (const n of [0, -1, 1.5, Number.NaN, Infinity, 2 ** 32 + 1]) {
      expectQkError(() => rng.nextInt(n), QkValueError, 'QK_VALUE', 'Rng.nextInt', '"n"', String(n));
    }
    expect(rng.nextInt(1)).toBe(0);
  });
});

describe('Rng.nextNormal', () => {
  it('is the polar method on the PCG32 stream (pairs: u first, then the spare v)', () => {
    for (const [seed, stream] of [
      [0n, 0n],
      [2024n, 7n],
      [2n ** 60n + 1n, 3n],
    ] as const) {
      const rng = new Rng(seed, stream);
      const want = refNormals(seed, stream, 2001);
      const bad: string[] = [];
      for (let i = 0; i < want.length; i++) {
        const got = rng.nextNormal();
        // portableLog and Math.log differ by a few ulps; the result inherits about half that relative error
        if (!(Math.abs(got - want[i]!) <= 1e-14 * Math.max(1, Math.abs(want[i]!))))
          bad.push(`#${i}: ${got} vs ${want[i]}`);
      }
      expect(bad.slice(0, 5)).toEqual([]);
    }
  });

  it('has mean 0, variance 1, skewness 0 and excess kurtosis 0 within 5 standard errors (200k draws)', () => {
    const rng = new Rng(31337);
    const n = 200_000;
    const x = new Float64Array(n);
    for (let i = 0; i < n; i++) x[i] = rng.nextNormal();
    let m1 = 0;
    for (const v of x) m1 += v;
    m1 /= n;
    let m2 = 0;
    let m3 = 0;
    let m4 = 0;
    for (const v of x) {
      const d = v - m1;
      m2 += d * d;
      m3 += d * d * d;
      m4 += d * d * d * d;
    }
    m2 /= n;
    m3 /= n;
    m4 /= n;
    // Standard errors for a normal population: mean 1/√n, variance √(2/n), skewness √(6/n), kurtosis √(24/n).
    expect(Math.abs(m1)).toBeLessThan(5 / Math.sqrt(n));
    expect(Math.abs(m2 - 1)).toBeLessThan(5 * Math.sqrt(2 / n));
    expect(Math.abs(m3 / m2 ** 1.5)).toBeLessThan(5 * Math.sqrt(6 / n));
    expect(Math.abs(m4 / m2 ** 2 - 3)).toBeLessThan(5 * Math.sqrt(24 / n));
    // Tail mass beyond 3σ: P = 0.0026998; binomial SE √(P(1−P)/n).
    const tail = x.filter((v) => Math.abs(v) > 3).length / n;
    expect(Math.abs(tail - 0.0026998)).toBeLessThan(5 * Math.sqrt((0.0027 * 0.9973) / n));
  });
});

describe('portableLog', () => {
  it('agrees with Math.log to within 3 ulps over (1e-300, 1e10)', () => {
    const next = xorshift32(0xc0ffee);
    const xs: number[] = [];
    // log-uniform over the whole range
    for (let i = 0; i < 50_000; i++) xs.push(10 ** (-300 + (310 * next()) / 2 ** 32));
    // near 1, where the result is tiny and relative accuracy matters most
    for (let i = 1; i < 2000; i++)
      xs.push(1 + i * 2 ** -52, 1 - i * 2 ** -53, 1 + next() / 2 ** 42, 1 - next() / 2 ** 42);
    // around the √2 split of the mantissa, and in (0, 1) as the polar method uses it
    for (let i = 0; i < 2000; i++) {
      xs.push(
        Math.SQRT2 * (1 + (next() / 2 ** 32 - 0.5) * 1e-6),
        Math.SQRT1_2 * (1 + (next() / 2 ** 32 - 0.5) * 1e-6),
      );
      xs.push(next() / 2 ** 32 + 2 ** -40);
    }
    // exact powers of two
    for (let k = -990; k <= 33; k++) xs.push(2 ** k);
    let worst = 0;
    let worstAt = 0;
    for (const x of xs) {
      const want = Math.log(x);
      const got = portableLog(x);
      if (want === 0) {
        expect(got).toBe(0);
        continue;
      }
      const err = Math.abs(got - want) / ulp(want);
      if (err > worst) {
        worst = err;
        worstAt = x;
      }
    }
    expect(worst, `worst at x = ${worstAt}`).toBeLessThanOrEqual(3);
    expect(portableLog(1)).toBe(0);
  });
});

describe('determinism across processes', () => {
  const dist = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/index.js');

  /** Plain JavaScript run both in the child (on the built package) and here (on the sources), given `api`. */
  const SNAPSHOT = `
    const hexOf = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');
    const rng = new api.Rng(2 ** 40 + 3, 7n);
    const u32 = Uint32Array.from({ length: 16 }, () => rng.nextU32());
    const normals = Float64Array.from({ length: 16 }, () => rng.nextNormal());
    return {
      randnF32: hexOf(api.Tensor.randn([1000], { seed: 1234 }).data),
      randnBf16: hexOf(api.Tensor.randn([1000], { seed: 1234, dtype: 'bf16' }).data),
      randnF16: hexOf(api.Tensor.randn([257], { seed: 99n, dtype: 'f16', mean: 1, std: 3 }).data),
      randF32: hexOf(api.Tensor.rand([500], { seed: 5, low: -2, high: 2 }).data),
      u32: hexOf(u32),
      normals: hexOf(normals),
    };
  `;

  it('a child node process importing the built package draws the same bits', () => {
    expect(existsSync(dist), `${dist} is missing: build @qk/ops first (turbo runs build before test)`).toBe(
      true,
    );
    const script = `
      const api = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const snapshot = (api) => {${SNAPSHOT}};
      process.stdout.write(JSON.stringify(snapshot(api)));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const child = JSON.parse(out) as Record<string, string>;
    const here = new Function('api', SNAPSHOT)({ Tensor, Rng }) as Record<string, string>;
    expect(Object.keys(child).sort()).toEqual(Object.keys(here).sort());
    for (const key of Object.keys(here)) expect(child[key], key).toBe(here[key]);
    expect(here.randnF32!.length).toBe(1000 * 4 * 2);
    expect(here.normals!.length).toBe(16 * 8 * 2);
  });
});
