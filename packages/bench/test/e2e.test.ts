/**
 * The end-to-end suites with a stand-in model (known, seeded speeds) and a stand-in python3 that prints the HF peer
 * script's JSON: checks the arithmetic from measurements to rows, ratios, peers and the report's validity.
 */
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@qk/ops';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type E2eModel,
  promptIds,
  runDecodeSuite,
  runHfPeers,
  runPatchSuite,
  runPrefillSuite,
  validateReport,
} from '../src/index.js';

const ceiling = { kind: 'device-copy' as const, gbPerS: 3000 };

/** A model whose decode rate depends on engine and position, with seeded jitter; records what it was asked. */
function fakeModel(
  engine: string,
  rng: Rng,
  calls: { ids: number[]; max: number }[],
  patchable = false,
): E2eModel {
  const base = engine === 'megakernel' ? 900 : 700;
  let patched: Record<string, string> = {};
  return {
    engine,
    source: 'fake-0.6b',
    vocabSize: 1000,
    bytesPerToken: (p) => 1.2e9 + 1e5 * p,
    generate: async (ids, max) => {
      calls.push({ ids, max });
      const slow = Object.keys(patched).length;
      return {
        prefillMs: ids.length * 0.01 * (1 + slow) * (1 + 0.05 * rng.nextFloat()),
        decodeTokensPerSecond: (base / (1 + ids.length / 4096) / (1 + slow)) * (1 + 0.05 * rng.nextFloat()),
      };
    },
    ...(patchable
      ? {
          patch: (spec: Record<string, string>) => {
            patched = spec;
            return () => {
              patched = {};
            };
          },
        }
      : {}),
    dispose: () => {},
  };
}

/**
 * A python3 stand-in that prints a fixed hf_decode.py result (decode or prefill); with `argsFile`, it first writes the
 * arguments it was called with there, one per line.
 */
function fakePython(doc: unknown, argsFile?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'qk-fakepy-'));
  const file = join(dir, 'python3');
  const record = argsFile ? `printf '%s\\n' "$@" > '${argsFile}'\n` : '';
  writeFileSync(file, `#!/bin/sh\n${record}echo 'progress' 1>&2\necho '${JSON.stringify(doc)}'\n`);
  chmodSync(file, 0o755);
  return file;
}

afterEach(() => {
  delete process.env.QK_PYTHON;
});

describe('promptIds', () => {
  it('is deterministic, of the asked length and below the limit', () => {
    const a = promptIds(300, 977);
    expect(a).toHaveLength(300);
    expect(a).toEqual(promptIds(300, 977));
    expect(a.every((x) => Number.isInteger(x) && x >= 0 && x < 977)).toBe(true);
    expect(new Set(a).size).toBeGreaterThan(200);
  });
});

describe('runDecodeSuite', () => {
  it('measures each engine at each position, computes bandwidth and ratios to the HF peers', async () => {
    process.env.QK_PYTHON = fakePython({
      torch: '2.9',
      transformers: '4.57',
      results: [
        { peer: 'hf-eager', position: 1, tokPerS: 40 },
        { peer: 'hf-static-graph', position: 1, tokPerS: 220 },
        { peer: 'hf-static-graph', position: 64, tokPerS: 210 },
      ],
    });
    const rng = new Rng(11);
    const calls: { ids: number[]; max: number }[] = [];
    const r = await runDecodeSuite({
      backend: 'cuda',
      open: async (engine) => fakeModel(engine ?? 'layered', rng, calls),
      engines: ['layered', 'megakernel'],
      positions: [1, 64],
      tokens: 32,
      runs: 3,
      hfCheckpoint: '/ckpt',
      ceiling,
    });
    expect(validateReport(r)).toEqual([]);
    expect(r.rows.map((x) => x.id)).toEqual(['layered-p1', 'layered-p64', 'megakernel-p1', 'megakernel-p64']);
    // Per engine and position: one warm-up of min(8, tokens) and 3 timed runs of 32 tokens on P prompt ids.
    expect(calls).toHaveLength(2 * 2 * 4);
    expect(calls.filter((c) => c.max === 32)).toHaveLength(12);
    for (const row of r.rows) {
      const runs = row.extra!.runsTokPerS as number[];
      const sorted = [...runs].sort((a, b) => a - b);
      expect(row.tokPerS).toBeCloseTo(sorted[1]!, 9);
      expect(row.timing.median).toBeCloseTo(1e6 / sorted[1]!, 6);
      const bytes = 1.2e9 + 1e5 * ((row.params.position as number) + 16);
      expect(row.bytes).toBe(bytes);
      expect(row.gbPerS).toBeCloseTo((bytes * row.tokPerS!) / 1e9, 6);
      expect(row.pctOfCeiling).toBeCloseTo((100 * row.gbPerS!) / 3000, 6);
    }
    const mk1 = r.rows.find((x) => x.id === 'megakernel-p1')!;
    const graph = mk1.peers['hf-static-graph'];
    expect(graph && 'ratio' in graph && graph.ratio).toBeCloseTo(mk1.tokPerS! / 220, 6);
    expect(r.rows.find((x) => x.id === 'layered-p64')!.peers['hf-eager']).toBeUndefined();
    expect(r.peers.every((p) => p.available && p.version === 'torch 2.9, transformers 4.57')).toBe(true);
    expect(r.charts[0]!.peers).toEqual(['hf-eager', 'hf-static-graph']);
  });

  it('runs only the HF peers asked for (--hf-peers graph), and says why the other has no column', async () => {
    const argsFile = join(mkdtempSync(join(tmpdir(), 'qk-fakepy-args-')), 'args');
    process.env.QK_PYTHON = fakePython(
      {
        torch: '2.9',
        transformers: '4.57',
        results: [
          { peer: 'hf-static-graph', position: 1, tokPerS: 230 },
          { peer: 'hf-static-graph', position: 64, tokPerS: 190 },
        ],
      },
      argsFile,
    );
    const rng = new Rng(5);
    const r = await runDecodeSuite({
      backend: 'cuda',
      open: async (engine) => fakeModel(engine ?? 'megakernel', rng, []),
      engines: ['megakernel'],
      positions: [1, 64],
      tokens: 16,
      runs: 3,
      hfCheckpoint: '/ckpt',
      hfPeers: ['graph'],
      ceiling,
    });
    expect(validateReport(r)).toEqual([]);
    const args = readFileSync(argsFile, 'utf8').trim().split('\n');
    expect(args.slice(args.indexOf('--peers'), args.indexOf('--peers') + 2)).toEqual(['--peers', 'graph']);
    expect(args.slice(args.indexOf('--positions'), args.indexOf('--positions') + 2)).toEqual([
      '--positions',
      '1,64',
    ]);
    for (const row of r.rows) {
      expect(Object.keys(row.peers)).toEqual(['hf-static-graph']);
      const graph = row.peers['hf-static-graph'];
      const want = row.params.position === 1 ? 230 : 190;
      expect(graph && 'ratio' in graph && graph.ratio).toBeCloseTo(row.tokPerS! / want, 6);
    }
    const eager = r.peers.find((p) => p.name === 'hf-eager')!;
    expect(eager.available).toBe(false);
    expect(eager.reason).toContain('not requested');
    expect(r.peers.find((p) => p.name === 'hf-static-graph')!.available).toBe(true);
    expect(r.charts[0]!.peers).toEqual(['hf-static-graph']);
    expect(r.description).toContain('static cache');
    expect(r.description).not.toContain('eager');
    await expect(
      runDecodeSuite({
        backend: 'cuda',
        open: async () => fakeModel('megakernel', rng, []),
        positions: [1],
        tokens: 4,
        runs: 1,
        hfPeers: [],
        ceiling,
      }),
    ).rejects.toThrow(/at least one/);
  });

  it('asks hf_decode.py for both peers by default', async () => {
    const argsFile = join(mkdtempSync(join(tmpdir(), 'qk-fakepy-args-')), 'args');
    process.env.QK_PYTHON = fakePython({ torch: '2.9', transformers: '4.57', results: [] }, argsFile);
    const r = runHfPeers('/ckpt', { positions: [1, 128], tokens: 8 }, 2);
    expect(r.available).toBe(true);
    const args = readFileSync(argsFile, 'utf8').trim().split('\n');
    expect(args[0]).toMatch(/hf_decode\.py$/);
    expect(args.slice(1)).toEqual([
      '/ckpt',
      '--positions',
      '1,128',
      '--tokens',
      '8',
      '--peers',
      'eager,graph',
      '--runs',
      '2',
    ]);
  });

  it('notes an engine that cannot open and keeps measuring the others; peers say why they did not run', async () => {
    const rng = new Rng(3);
    const r = await runDecodeSuite({
      backend: 'cuda',
      open: async (engine) => {
        if (engine === 'megakernel') throw new Error('megakernel needs sm_90');
        return fakeModel('layered', rng, []);
      },
      engines: ['layered', 'megakernel'],
      positions: [1],
      tokens: 8,
      runs: 1,
      ceiling,
    });
    expect(validateReport(r)).toEqual([]);
    expect(r.rows.map((x) => x.series)).toEqual(['layered']);
    expect(r.notes?.join(' ')).toContain('megakernel needs sm_90');
    expect(r.peers.every((p) => !p.available && /--model DIR/.test(p.reason!))).toBe(true);
    expect(r.charts[0]!.peers).toEqual([]);
  });
});

describe('runDecodeSuite notes', () => {
  it('says in the description and the notes when qk samples (its HF peers decode greedily)', async () => {
    process.env.QK_PYTHON = fakePython({
      torch: '2.9',
      transformers: '4.57',
      results: [{ peer: 'hf-static-graph', position: 1, tokPerS: 220 }],
    });
    const rng = new Rng(4);
    const sampling = 'temperature 0.7, top-k 5, top-p 0.9, seed 3';
    const run = (s?: string) =>
      runDecodeSuite({
        backend: 'cuda',
        open: async (engine) => ({
          ...fakeModel(engine ?? 'megakernel', rng, []),
          ...(s ? { sampling: s } : {}),
        }),
        engines: ['megakernel'],
        positions: [1],
        tokens: 8,
        runs: 1,
        hfCheckpoint: '/ckpt',
        hfPeers: ['graph'],
        ceiling,
      });
    const sampled = await run(sampling);
    expect(validateReport(sampled)).toEqual([]);
    expect(sampled.description).toContain(`Batch-1 decode sampling with ${sampling} from JS`);
    expect(sampled.notes?.some((n) => n.includes('the HF peers decode greedily'))).toBe(true);
    const greedy = await run();
    expect(greedy.description).toContain('Batch-1 greedy decode from JS');
    expect(greedy.notes?.some((n) => n.includes('greedily'))).toBe(false);
  });

  it("carries a model's note on how it reads its bytes into the report, once per engine", async () => {
    const rng = new Rng(4);
    const note = 'megakernel: greedy steps screen the LM head in int8';
    const r = await runDecodeSuite({
      backend: 'cuda',
      open: async (engine) => ({
        ...fakeModel(engine!, rng, []),
        ...(engine === 'megakernel' ? { note } : {}),
      }),
      engines: ['layered', 'megakernel'],
      positions: [1, 64],
      tokens: 8,
      runs: 1,
      peers: false,
      ceiling,
    });
    expect(validateReport(r)).toEqual([]);
    expect(r.notes?.filter((n) => n === note)).toHaveLength(1);
    expect(r.notes?.some((n) => n.startsWith('layered:'))).toBe(false);
  });
});

describe('runPrefillSuite', () => {
  it('reports prefill ms per length with the ratio to each HF attention implementation', async () => {
    process.env.QK_PYTHON = fakePython({
      torch: '2.9',
      transformers: '4.57',
      mode: 'prefill',
      results: [
        { peer: 'hf-sdpa', length: 128, ms: 7 },
        { peer: 'hf-eager', length: 128, ms: 9 },
      ],
    });
    const rng = new Rng(8);
    const r = await runPrefillSuite({
      backend: 'cuda',
      open: async () => fakeModel('layered', rng, []),
      lengths: [128, 512],
      runs: 5,
      hfCheckpoint: '/ckpt',
    });
    expect(validateReport(r)).toEqual([]);
    expect(r.unit).toBe('ms');
    const [a, b] = r.rows;
    expect(a!.timing.median).toBeGreaterThan(1.28 * 0.99);
    expect(b!.timing.median).toBeGreaterThan(a!.timing.median);
    const p = a!.peers['hf-eager'];
    expect(p && 'ratio' in p && p.ratio).toBeCloseTo(9 / a!.timing.median, 9);
    const s = a!.peers['hf-sdpa'];
    expect(s && 'ratio' in s && s.ratio).toBeCloseTo(7 / a!.timing.median, 9);
    expect(b!.peers).toEqual({});
    expect(r.peers.map((x) => [x.name, x.available])).toEqual([
      ['hf-sdpa', true],
      ['hf-eager', true],
    ]);
    expect(r.charts[0]!.peers).toEqual(['hf-sdpa', 'hf-eager']);
  });
});

describe('runPatchSuite', () => {
  it('one prefill row per variant and length, one decode row per variant, and the speedup table', async () => {
    const rng = new Rng(21);
    const r = await runPatchSuite({
      backend: 'cuda',
      open: async () => fakeModel('layered', rng, [], true),
      lengths: [64, 256],
      tokens: 16,
      runs: 3,
    });
    expect(validateReport(r)).toEqual([]);
    expect(r.rows).toHaveLength(5 * 3);
    const table = r.tables![0]!;
    expect(table.rows.map((row) => row[0])).toEqual([
      'fused (default)',
      'RMSNorm eager',
      'SwiGLU MLP eager',
      'RoPE eager',
      'all eager',
    ]);
    // The fake slows down by (1 + patched kinds): all eager is ~4× slower to decode, so the fused speedup is > 3.
    const speed = Number.parseFloat(table.rows[4]!.at(-1)!);
    expect(speed).toBeGreaterThan(3.5);
    expect(Number.parseFloat(table.rows[0]!.at(-1)!)).toBeCloseTo(1, 9);
  });

  it('is skipped with the reason when the engine has no patchable modules', async () => {
    const r = await runPatchSuite({
      backend: 'cpu',
      open: async () => fakeModel('cpu', new Rng(1), []),
      lengths: [16],
    });
    expect(r.status).toBe('skipped');
    expect(r.skipReason).toMatch(/patchable/);
    expect(validateReport(r)).toEqual([]);
  });
});

describe('runHfPeers', () => {
  it('explains every way it can fail to run', () => {
    expect(runHfPeers('/x', { prefill: [1] }, 1, false).reason).toContain('disabled');
    expect(runHfPeers(undefined, { prefill: [1] }, 1).reason).toContain('--model DIR');
    process.env.QK_PYTHON = join(tmpdir(), 'no-such-python-here');
    expect(runHfPeers('/x', { prefill: [1] }, 1).available).toBe(false);
    process.env.QK_PYTHON = fakePython('not json {');
    const r = runHfPeers('/x', { positions: [1], tokens: 4 }, 1);
    expect(r.available).toBe(false);
  });
});
