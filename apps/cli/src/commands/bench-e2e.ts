/**
 * End-to-end benchmarks through the public model API (`loadQwen3` → `generate`), host overhead included:
 * `qk bench decode` (tokens/s per position beside HF transformers measured in the same invocation) and
 * `qk bench patch` (prefill latency and decode speed with eager-style vs fused modules).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gpuInfo, hostInfo, measureCopyCeiling, peersDir, summarize } from '@qk/bench';
import { cudaAvailable } from '@qk/ops';
import type { ModuleKind, Qwen3Config, Qwen3Model } from '@qk/qwen3';
import { intOption, parse, UsageError } from '../args.js';
import { MODEL_OPTIONS, type ModelValues, openModel, withInterrupt } from '../model-options.js';

export const BENCH_DECODE_HELP = `qk bench decode — batch-1 greedy decode speed per position, from JS end to end

Usage: qk bench decode [--model DIR | --preset NAME] [--engine NAME] [--positions LIST] [--tokens N] [--runs N]
                       [--no-peers] [--no-layered] [--json FILE] [--markdown FILE]

For each position P: a prompt of P seeded random ids, then N greedy tokens through model.generate (streaming
detokenisation and the host loop included). Prints tok/s, µs/token, the bytes a token must move (weights once,
plus the KV cache read up to P) as GB/s and as a share of the device-to-device copy ceiling measured in the same
run, and the ratio to HF transformers (eager, and static cache + one CUDA graph per step) run on the same
checkpoint in the same invocation (needs --model DIR and python3 with torch + transformers). When the engine is
not layered (the megakernel), the layered engine is measured on the same model afterwards and its ratio shown.

Options:
  --positions LIST  comma-separated (default 1,128,512,1024)
  --tokens N        generated tokens per run (default 256)
  --runs N          runs per position; the median is reported (default 3)
  --no-peers        skip HF transformers
  --no-layered      skip the layered-engine comparison
  --json FILE / --markdown FILE   write the report`;

export const BENCH_PATCH_HELP = `qk bench patch — eager-style vs fused modules, end to end

Usage: qk bench patch [--model DIR | --preset NAME] [--lengths LIST] [--tokens N] [--runs N] [--json FILE]
                      [--markdown FILE]

One row per variant (everything fused; RMSNorm, SwiGLU MLP, RoPE each eager-style alone; everything eager):
prefill latency for prompts of each length (default 128,512,1024,2048) and decode tok/s (N tokens after a
128-token prompt, default 128), with the speedup of the fused default over each row.`;

function intList(text: string | undefined, fallback: number[], option: string): number[] {
  if (text === undefined) return fallback;
  const values = text.split(',').map((s) => Number(s.trim()));
  if (values.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    throw new UsageError(`--${option} must be a comma-separated list of positive integers, got "${text}"`);
  }
  return values;
}

function positiveInt(text: string | undefined, fallback: number, option: string): number {
  const v = intOption(text, option) ?? fallback;
  if (v < 1) throw new UsageError(`--${option} must be a positive integer`);
  return v;
}

const median = (xs: number[]) => summarize(xs).median;

/** Seeded prompt ids the tokenizer can print (a fixed LCG: the same prompt on every run and machine). */
function promptIds(length: number, limit: number): number[] {
  let s = 12345 + length;
  return Array.from({ length }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s % limit;
  });
}

/** Bytes one decode step must read: every weight once (one embedding row), and the KV cache up to `position`. */
export function bytesPerToken(c: Qwen3Config, position: number, bytesPerElement = 2): number {
  const perLayer =
    c.hiddenSize * (c.numHeads + 2 * c.numKvHeads) * c.headDim +
    c.numHeads * c.headDim * c.hiddenSize +
    3 * c.hiddenSize * c.intermediateSize +
    2 * c.hiddenSize +
    2 * c.headDim;
  const weights = c.numLayers * perLayer + c.hiddenSize + c.vocabSize * c.hiddenSize + c.hiddenSize;
  const kv = 2 * c.numLayers * c.numKvHeads * c.headDim * position;
  return (weights + kv) * bytesPerElement;
}

async function timeGeneration(model: Qwen3Model, ids: number[], tokens: number) {
  const result = await model.generate(ids, { maxTokens: tokens, temperature: 0 }).result;
  return result.stats;
}

function runHfPeers(dir: string, positions: number[], tokens: number, runs: number) {
  const found = join(peersDir(), 'hf_decode.py');
  if (!existsSync(found)) return { available: false, reason: `${found} not found`, results: [] };
  const r = spawnSync(
    'python3',
    [found, dir, '--positions', positions.join(','), '--tokens', String(tokens), '--runs', String(runs)],
    { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 },
  );
  if (r.status !== 0) {
    return {
      available: false,
      reason: `hf_decode.py failed: ${(r.stderr || r.error?.message || '').trim().split('\n').pop()}`,
      results: [],
    };
  }
  const doc = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
    torch: string;
    transformers: string;
    results: { peer: string; position: number; tokPerS: number }[];
  };
  return { available: true, torch: doc.torch, transformers: doc.transformers, results: doc.results };
}

export async function benchDecodeCommand(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      ...MODEL_OPTIONS,
      positions: { type: 'string' },
      tokens: { type: 'string' },
      runs: { type: 'string' },
      'no-peers': { type: 'boolean' },
      'no-layered': { type: 'boolean' },
      json: { type: 'string' },
      markdown: { type: 'string' },
    } as const,
    true,
  );
  if (values.help) {
    console.log(BENCH_DECODE_HELP);
    return 0;
  }
  const positions = intList(values.positions, [1, 128, 512, 1024], 'positions');
  const tokens = positiveInt(values.tokens, 256, 'tokens');
  const runs = positiveInt(values.runs, 3, 'runs');
  const maxContext = Math.max(...positions) + tokens + 1;
  const modelValues = {
    ...values,
    'max-context': values['max-context'] ?? String(maxContext),
  } as ModelValues;
  const gpu = cudaAvailable();
  const ceiling = gpu ? measureCopyCeiling() : undefined;
  const measure = (engineValues: ModelValues) =>
    withInterrupt(async (signal) => {
      const model = await openModel(engineValues, signal);
      try {
        const out = [];
        for (const position of positions) {
          const ids = promptIds(position, model.tokenizer.vocabSize);
          await timeGeneration(model, ids, Math.min(8, tokens)); // warm-up: graph capture, allocator
          const rates: number[] = [];
          for (let r = 0; r < runs; r++)
            rates.push((await timeGeneration(model, ids, tokens)).decodeTokensPerSecond);
          const tokPerS = median(rates);
          const bytes = bytesPerToken(model.config, position + tokens / 2);
          const gbPerS = (bytes * tokPerS) / 1e9;
          out.push({
            position,
            tokPerS,
            usPerToken: 1e6 / tokPerS,
            gbPerToken: bytes / 1e9,
            gbPerS,
            pctOfCeiling: ceiling ? (100 * gbPerS) / ceiling.gbPerS : null,
            runs: rates,
          });
          console.error(`  ${model.engine}, position ${position}: ${tokPerS.toFixed(1)} tok/s`);
        }
        return { engine: model.engine, source: model.source, config: model.config, rows: out };
      } finally {
        model.dispose();
      }
    });
  const rows = await measure(modelValues);
  const layered =
    rows.engine === 'layered' || rows.engine === 'cpu' || values['no-layered']
      ? undefined
      : await measure({ ...modelValues, engine: 'layered' });
  const layeredRate = (position: number) => layered?.rows.find((r) => r.position === position)?.tokPerS;
  const peers =
    values['no-peers'] || values.model === undefined
      ? {
          available: false,
          reason: values['no-peers'] ? 'disabled (--no-peers)' : 'needs --model DIR',
          results: [],
        }
      : runHfPeers(values.model, positions, Math.min(tokens, 128), runs);
  const peerRate = (peer: string, position: number) =>
    peers.results.find((p) => p.peer === peer && p.position === position)?.tokPerS;
  const lines = [
    `qk bench decode: ${rows.source}, engine ${rows.engine}, ${tokens} tokens × ${runs} runs (median)${ceiling ? `; copy ceiling ${ceiling.gbPerS.toFixed(0)} GB/s` : ''}`,
    '',
    `| position | tok/s | µs/token | GB/token | GB/s | % ceiling | HF eager tok/s | HF static+graph tok/s | × eager | × static+graph |${layered ? ' layered tok/s | × layered |' : ''}`,
    `| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |${layered ? ' ---: | ---: |' : ''}`,
    ...rows.rows.map((r) => {
      const eager = peerRate('hf-eager', r.position);
      const graph = peerRate('hf-static-graph', r.position);
      const lay = layeredRate(r.position);
      const f = (x: number | undefined, d = 1) => (x === undefined ? '—' : x.toFixed(d));
      const vsLayered = layered ? ` ${f(lay)} | ${f(lay && r.tokPerS / lay, 2)} |` : '';
      return `| ${r.position} | ${r.tokPerS.toFixed(1)} | ${r.usPerToken.toFixed(0)} | ${r.gbPerToken.toFixed(3)} | ${r.gbPerS.toFixed(0)} | ${r.pctOfCeiling === null ? '—' : `${r.pctOfCeiling.toFixed(1)}%`} | ${f(eager)} | ${f(graph)} | ${f(eager && r.tokPerS / eager, 2)} | ${f(graph && r.tokPerS / graph, 2)} |${vsLayered}`;
    }),
  ];
  if (!peers.available) lines.push('', `HF peers not run: ${peers.reason}`);
  console.log(lines.join('\n'));
  const report = {
    schema: 'qk.bench/1',
    suite: 'decode',
    host: hostInfo(),
    gpu: gpu ? gpuInfo() : undefined,
    ceiling,
    engine: rows.engine,
    model: rows.source,
    tokens,
    runs,
    rows: rows.rows,
    layered: layered?.rows,
    peers,
  };
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 1)}\n`);
  if (values.markdown) writeFileSync(values.markdown, `${lines.join('\n')}\n`);
  return 0;
}

const PATCH_ROWS: { name: string; spec: Partial<Record<ModuleKind, string>> }[] = [
  { name: 'fused (default)', spec: {} },
  { name: 'RMSNorm eager', spec: { rmsnorm: 'eager' } },
  { name: 'SwiGLU MLP eager', spec: { mlp: 'eager' } },
  { name: 'RoPE eager', spec: { rope: 'eager' } },
  { name: 'all eager', spec: { rmsnorm: 'eager', mlp: 'eager', rope: 'eager' } },
];

export async function benchPatchCommand(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      ...MODEL_OPTIONS,
      lengths: { type: 'string' },
      tokens: { type: 'string' },
      runs: { type: 'string' },
      json: { type: 'string' },
      markdown: { type: 'string' },
    } as const,
    true,
  );
  if (values.help) {
    console.log(BENCH_PATCH_HELP);
    return 0;
  }
  const lengths = intList(values.lengths, [128, 512, 1024, 2048], 'lengths');
  const tokens = positiveInt(values.tokens, 128, 'tokens');
  const runs = positiveInt(values.runs, 3, 'runs');
  const maxContext = Math.max(...lengths, 128 + tokens) + 1;
  const modelValues = {
    ...values,
    'max-context': values['max-context'] ?? String(maxContext),
  } as ModelValues;
  const result = await withInterrupt(async (signal) => {
    const model = await openModel(modelValues, signal);
    try {
      const out = [];
      for (const row of PATCH_ROWS) {
        const undo = model.patch(row.spec);
        try {
          const prefillMs: Record<number, number> = {};
          for (const length of lengths) {
            const ids = promptIds(length, model.tokenizer.vocabSize);
            await timeGeneration(model, ids, 1);
            const times: number[] = [];
            for (let r = 0; r < runs; r++) times.push((await timeGeneration(model, ids, 1)).prefillMs);
            prefillMs[length] = median(times);
          }
          const ids = promptIds(128, model.tokenizer.vocabSize);
          await timeGeneration(model, ids, 8);
          const rates: number[] = [];
          for (let r = 0; r < runs; r++)
            rates.push((await timeGeneration(model, ids, tokens)).decodeTokensPerSecond);
          out.push({ name: row.name, spec: row.spec, prefillMs, decodeTokPerS: median(rates) });
          console.error(`  ${row.name}: decode ${median(rates).toFixed(1)} tok/s`);
        } finally {
          undo();
        }
      }
      return { engine: model.engine, source: model.source, rows: out };
    } finally {
      model.dispose();
    }
  });
  const base = result.rows[0]!;
  const lines = [
    `qk bench patch: ${result.source}, engine ${result.engine}; prefill = the prompt's forward pass + first token; decode after a 128-token prompt; median of ${runs}`,
    '',
    `| variant | ${lengths.map((l) => `prefill ${l} ms`).join(' | ')} | decode tok/s | fused speedup (prefill ${lengths.at(-1)}) | fused speedup (decode) |`,
    `| --- | ${lengths.map(() => '---:').join(' | ')} | ---: | ---: | ---: |`,
    ...result.rows.map(
      (r) =>
        `| ${r.name} | ${lengths.map((l) => r.prefillMs[l]!.toFixed(2)).join(' | ')} | ${r.decodeTokPerS.toFixed(1)} | ${(r.prefillMs[lengths.at(-1)!]! / base.prefillMs[lengths.at(-1)!]!).toFixed(2)}× | ${(base.decodeTokPerS / r.decodeTokPerS).toFixed(2)}× |`,
    ),
  ];
  console.log(lines.join('\n'));
  const report = {
    schema: 'qk.bench/1',
    suite: 'patch',
    host: hostInfo(),
    gpu: cudaAvailable() ? gpuInfo() : undefined,
    ...result,
    lengths,
    tokens,
    runs,
  };
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 1)}\n`);
  if (values.markdown) writeFileSync(values.markdown, `${lines.join('\n')}\n`);
  return 0;
}
