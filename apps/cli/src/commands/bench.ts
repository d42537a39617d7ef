/**
 * `qk bench`: every named suite of @qk/bench — the op suites (each against the copy ceiling and PyTorch measured
 * in the same run) and the end-to-end ones through loadQwen3 + generate (beside HF transformers) — with JSON,
 * Markdown and SVG reports.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BenchBackend,
  type BenchIndex,
  type BenchReport,
  type Ceiling,
  defaultBackend,
  HF_DECODE_PEERS,
  type HfDecodePeer,
  machineInfo,
  measureCeiling,
  OP_SUITES,
  OP_SUITES_BY_NAME,
  readReport,
  renderReportDir,
  reportMarkdown,
  runDecodeSuite,
  runOpSuite,
  runPatchSuite,
  runPrefillSuite,
  runStructuredSuite,
  skippedReport,
  writeReports,
} from '@qk/bench';
import { cudaStatus } from '@qk/ops';
import type { GenerateOptions, MegakernelEngineOptions } from '@qk/qwen3';
import { intOption, type OptionValues, parse, UsageError } from '../args.js';
import { megakernelFlag } from '../megakernel-flag.js';
import {
  MODEL_HELP,
  MODEL_OPTIONS,
  type ModelValues,
  openModel,
  samplingOptions,
  withInterrupt,
} from '../model-options.js';
import { benchModel, structuredBenchModel } from './bench-model.js';
import { BENCH_SERVE_HELP, benchServe } from './bench-serve.js';

const E2E_SUITES = ['decode', 'prefill', 'patch'] as const;
type E2eSuite = (typeof E2E_SUITES)[number];

export const BENCH_HELP = `qk bench — measure qk against the GPU's copy bandwidth, PyTorch and HF transformers

Usage: qk bench <suite>... [options]     run the named suites (or: all)
       qk bench list                     the suites, one line each
       qk bench render DIR               redraw Markdown and SVG charts from a report directory's JSON

Op suites (µs per call over rotating inputs larger than L2, CUDA-graph replays timed with CUDA events; GB/s
against the device-to-device copy ceiling measured in the same run; PyTorch eager and torch.compile measured
in the same invocation when python3 with torch and CUDA is available):
${OP_SUITES.map((s) => `  ${s.name.padEnd(12)}${s.title}`).join('\n')}
  ops         the cuda-core issue's bars in one table (RMSNorm, fused add+RMSNorm, RoPE, SwiGLU, GEMV, decode
              attention)

End-to-end suites (loadQwen3 + generate, host overhead included; HF transformers on the same checkpoint when
--model DIR is given):
  decode      decode tok/s per position, per engine (default engines: layered and megakernel on a GPU, for
              every --weights format), greedy unless the sampling flags below are given
  prefill     prompt latency per length
  patch       eager-style vs fused RMSNorm, SwiGLU and RoPE: prefill latency and decode tok/s per variant
  structured  JSON Schema output: grammar compile per new schema (bar ≤ 50 ms) and greedy constrained decode
              tok/s against the same model unconstrained (bar ≥ 0.85×); then decode with sampling controls
              (penalties, min-p, logprobs) against the same draw without them (bar ≥ 0.95×); on the default
              engine or --engine
${BENCH_SERVE_HELP}

Without a GPU the op suites run the plain-TypeScript references (float32) at small sizes and the end-to-end
suites the cpu engine on the tiny preset; in \`all\` the GPU suites are then listed as skipped, with the reason.

Options:
  --report DIR       write <suite>.json, <suite>.md, the SVG charts, index.json and README.md into DIR
                     (reports already in DIR under other names are kept)
  --json FILE        write the report(s) as JSON (one suite: the report; several: an array)
  --markdown FILE    write the Markdown of the report(s)
  --name NAME        report name for one suite (e.g. decode-8b beside decode in one report directory)
  --cpu              run on the CPU even when a GPU is present
  --filter ID        op suites: only cases whose id contains ID
  --no-peers         skip PyTorch / HF transformers
  --no-compile       skip torch.compile (PyTorch eager only)
  --hf-peers LIST    decode: the HF transformers peers, comma-separated: eager, graph (static cache + CUDA
                     graph), or both (default); graph alone takes a fraction of the time
  --engines LIST     end-to-end: engines to measure, comma-separated (e.g. layered,megakernel)
  --positions LIST   decode: positions (default 1,128,512,1024,4096; CPU 1,16,64)
  --tokens N         decode: tokens per run (default 256; CPU 16); patch: decode tokens (default 128);
                     structured: tokens per decode run (default 128; CPU 12)
  --lengths LIST     prefill and patch: prompt lengths (default prefill 128,512,1024,2048,4096,8192, patch
                     128,256,512,1024,2048; CPU 16,64)
  --runs N           end-to-end: runs per case, median reported (default 3)
  --no-layered       decode with --engine X: do not also measure the layered engine
  -h, --help         this help

${MODEL_HELP}

Decode sampling (default: greedy, as the HF peers decode):
  --temperature T    decode draws its tokens as qk generate does: by the model's sampling defaults
  --top-k K          (generation_config.json, else temperature 0.6, top-k 20, top-p 0.95) with the flags
  --top-p P          given in their place; any one of the four turns sampling on (--temperature 0: greedy).
  --seed N           The HF peers stay greedy. Decode only: prefill and patch stay greedy, and a run
                     without the decode suite refuses them
  --min-p, --presence-penalty, --frequency-penalty, --repetition-penalty, --logit-bias
                     the sampling controls of qk generate (any one turns them on, over the model's sampling
                     defaults or --temperature 0): decode then measures the steps that apply them`;

const OPTIONS = {
  ...MODEL_OPTIONS,
  report: { type: 'string' },
  json: { type: 'string' },
  markdown: { type: 'string' },
  name: { type: 'string' },
  cpu: { type: 'boolean' },
  filter: { type: 'string' },
  'no-peers': { type: 'boolean' },
  'no-compile': { type: 'boolean' },
  'hf-peers': { type: 'string' },
  engines: { type: 'string' },
  positions: { type: 'string' },
  tokens: { type: 'string' },
  lengths: { type: 'string' },
  runs: { type: 'string' },
  'no-layered': { type: 'boolean' },
  clients: { type: 'string' },
  duration: { type: 'string' },
  history: { type: 'string' },
  port: { type: 'string' },
  'leak-mib': { type: 'string' },
} as const;

type Values = OptionValues<typeof OPTIONS>;

function intList(text: string | undefined, fallback: number[], option: string): number[] {
  if (text === undefined) return fallback;
  const values = text.split(',').map((s) => Number(s.trim()));
  if (values.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    throw new UsageError(`--${option} must be a comma-separated list of positive integers, got "${text}"`);
  }
  return values;
}

/** `--hf-peers`: a comma-separated subset of eager, graph (undefined: both). */
export function hfPeerList(text: string | undefined): HfDecodePeer[] | undefined {
  if (text === undefined) return undefined;
  const names = text.split(',').map((s) => s.trim());
  const bad = names.filter((n) => !(HF_DECODE_PEERS as readonly string[]).includes(n));
  if (bad.length > 0) {
    throw new UsageError(
      `--hf-peers takes eager, graph or both, comma-separated; got "${text}" (unknown: ${bad.map((b) => `"${b}"`).join(', ')})`,
    );
  }
  return [...new Set(names as HfDecodePeer[])];
}

function positiveInt(text: string | undefined, fallback: number, option: string): number {
  const v = intOption(text, option) ?? fallback;
  if (v < 1) throw new UsageError(`--${option} must be a positive integer`);
  return v;
}

const SAMPLING_FLAGS = [
  'temperature',
  'top-k',
  'top-p',
  'seed',
  'min-p',
  'presence-penalty',
  'frequency-penalty',
  'repetition-penalty',
  'logit-bias',
] as const;

/**
 * The decode suite's sampling (undefined: greedy): the generation flags, checked before anything runs. Flags the
 * suites would ignore are refused: --max-tokens and --no-think always, the sampling flags without the decode suite.
 */
export function benchSampling(values: ModelValues, suites: readonly string[]): GenerateOptions | undefined {
  if (values['max-tokens'] !== undefined)
    throw new UsageError('qk bench takes --tokens N (tokens per decode run), not --max-tokens');
  if (values['no-think'])
    throw new UsageError(
      '--no-think applies to qk generate and qk chat: bench decodes from seeded ids, with no chat template',
    );
  const given = SAMPLING_FLAGS.filter((f) => values[f] !== undefined);
  if (given.length === 0) return undefined;
  if (!suites.includes('decode'))
    throw new UsageError(
      `--${given[0]} applies to the decode suite only (prefill and patch decode greedily)`,
    );
  return samplingOptions(values);
}

/** Every suite name `qk bench` accepts. */
export function suiteNames(): string[] {
  return [...OP_SUITES_BY_NAME.keys(), ...E2E_SUITES, 'structured', 'serve'];
}

export async function benchCommand(argv: string[]): Promise<number> {
  const parsed = parse(argv, OPTIONS, true);
  const values = parsed.values as Values & { help?: boolean };
  const positionals = parsed.positionals as string[];
  if (values.help || positionals.length === 0) {
    console.log(BENCH_HELP);
    return values.help ? 0 : 2;
  }
  if (positionals[0] === 'list') {
    for (const s of [...OP_SUITES_BY_NAME.values()]) console.log(`${s.name.padEnd(12)}${s.title}`);
    console.log(`${'decode'.padEnd(12)}Decode tok/s per position per engine, beside HF transformers`);
    console.log(`${'prefill'.padEnd(12)}Prefill latency per prompt length, beside HF transformers`);
    console.log(`${'patch'.padEnd(12)}Eager-style vs fused modules end to end`);
    console.log(
      `${'structured'.padEnd(12)}JSON Schema grammar compile and constrained decode vs unconstrained; sampling controls`,
    );
    console.log(`${'serve'.padEnd(12)}qk serve under concurrent clients, and prefix reuse (not in all)`);
    return 0;
  }
  if (positionals[0] === 'render') {
    const dir = positionals[1];
    if (!dir) throw new UsageError('qk bench render needs the report directory');
    if (!existsSync(join(dir, 'index.json')))
      throw new UsageError(`${dir} has no index.json (write one with --report)`);
    const index = renderReportDir(dir);
    console.log(`rendered ${index.suites.length} report(s) in ${dir}`);
    return 0;
  }
  const all = positionals.includes('all');
  const known = new Set(suiteNames());
  for (const p of positionals) {
    if (p !== 'all' && !known.has(p)) {
      throw new UsageError(
        `unknown suite "${p}"; available: ${suiteNames().join(', ')}, all (qk bench list)`,
      );
    }
  }
  const names = all
    ? [...OP_SUITES.map((s) => s.name), ...E2E_SUITES, 'structured']
    : [...new Set(positionals)];
  if (values.name !== undefined && names.length !== 1) throw new UsageError('--name needs exactly one suite');
  const hfPeers = hfPeerList(values['hf-peers']); // refused before anything runs
  const sampling = benchSampling(values, names);
  const megakernel = megakernelFlag(values['megakernel-tuning']); // (parsed once for every model the suites open)
  const backend: BenchBackend = values.cpu ? 'cpu' : defaultBackend();
  const gpuReason = cudaStatus().reason ?? 'no usable CUDA device';
  if (backend === 'cpu' && !values.cpu) {
    console.error(`qk bench: no GPU (${gpuReason}); running the CPU suites at small sizes.`);
  }
  const machine = machineInfo();
  if (machine.gpu) {
    const g = machine.gpu;
    console.error(
      `qk bench on ${g.name} (cc ${g.computeCapability}, driver ${g.driver}, CUDA ${g.cudaRuntime}), commit ${machine.commit ?? 'unknown'}`,
    );
  }
  const ceiling = measureCeiling(backend);
  console.error(`copy ceiling ${ceiling.gbPerS.toFixed(0)} GB/s (${ceiling.kind})`);
  // (a variant's numbers are not the default kernel's: the log says which it was)
  if (values['megakernel-tuning'] !== undefined)
    console.error(`megakernel options ${JSON.stringify(megakernel)}`);
  const reports: BenchReport[] = [];
  const log = (line: string) => console.error(`  ${line}`);
  for (const name of names) {
    const opSuite = OP_SUITES_BY_NAME.get(name);
    let report: BenchReport;
    if (opSuite) {
      report = runOpSuite(opSuite, {
        backend,
        ...(values.filter ? { filter: values.filter } : {}),
        peers: !values['no-peers'],
        compilePeers: !values['no-compile'],
        onProgress: log,
        machine,
        ceiling,
      });
      if (values.name) report = { ...report, suite: values.name };
    } else if (name === 'serve') {
      report = await benchServe(values, backend, machine, log, values.name);
    } else if (name === 'structured') {
      report = await benchStructured(values, megakernel, backend, machine, log);
    } else {
      report = await runE2e(
        name as E2eSuite,
        values,
        hfPeers,
        sampling,
        megakernel,
        backend,
        machine,
        ceiling,
        log,
      );
    }
    // In a CPU run of `all`, the GPU suites are listed as skipped beside their CPU results.
    if (all && backend === 'cpu' && !values.cpu) {
      const cpuName = `${report.suite}-cpu`;
      reports.push(
        skippedReport(
          { suite: report.suite, title: report.title, description: report.description, unit: report.unit },
          'cuda',
          gpuReason,
          machine,
        ),
      );
      report = { ...report, suite: cpuName, title: `${report.title} (CPU reference, small sizes)` };
    }
    reports.push(report);
    console.log(reportMarkdown(report));
    console.log('');
  }
  finish(reports, values);
  const failed = reports.flatMap((r) => (r.errors ?? []).map((e) => `${r.suite} ${e.id}`));
  if (failed.length > 0) {
    console.error(`qk bench: ${failed.length} case(s) failed: ${failed.join(', ')}`);
    return 1;
  }
  return 0;
}

async function runE2e(
  suite: E2eSuite,
  values: Values,
  hfPeers: HfDecodePeer[] | undefined,
  sampling: GenerateOptions | undefined,
  megakernel: MegakernelEngineOptions,
  backend: BenchBackend,
  machine: ReturnType<typeof machineInfo>,
  ceiling: Ceiling,
  log: (line: string) => void,
): Promise<BenchReport> {
  const cpu = backend === 'cpu';
  const runs = positiveInt(values.runs, 3, 'runs');
  const modelValues: ModelValues = { ...values, ...(cpu && !values.engine ? { engine: 'cpu' } : {}) };
  const engines = engineList(suite, values, cpu);
  const common = {
    backend,
    runs,
    peers: !values['no-peers'],
    onProgress: log,
    machine,
    ceiling,
    ...(values.model ? { hfCheckpoint: values.model } : {}),
    ...(values.name ? { name: values.name } : {}),
  };
  return withInterrupt(async (signal) => {
    // (Only decode samples: prefill and patch time greedy generations.)
    const open = async (engine: string | undefined, maxContext: number) =>
      benchModel(
        await openModel(
          {
            ...modelValues,
            ...(engine ? { engine } : {}),
            'max-context': modelValues['max-context'] ?? String(maxContext),
          },
          signal,
          megakernel,
        ),
        suite === 'decode' ? sampling : undefined,
      );
    if (suite === 'decode') {
      const positions = intList(values.positions, cpu ? [1, 16, 64] : [1, 128, 512, 1024, 4096], 'positions');
      const tokens = positiveInt(values.tokens, cpu ? 16 : 256, 'tokens');
      const maxContext = Math.max(...positions) + tokens + 1;
      return runDecodeSuite({
        ...common,
        engines,
        positions,
        tokens,
        ...(hfPeers ? { hfPeers } : {}),
        open: (e) => open(e, maxContext),
      });
    }
    const prefillLengths = cpu ? [16, 64] : [128, 512, 1024, 2048, 4096, 8192];
    const lengths = intList(
      values.lengths,
      suite === 'prefill' ? prefillLengths : cpu ? [16, 64] : [128, 256, 512, 1024, 2048],
      'lengths',
    );
    if (suite === 'prefill') {
      const maxContext = Math.max(...lengths) + 2;
      return runPrefillSuite({ ...common, engines, lengths, open: (e) => open(e, maxContext) });
    }
    const tokens = positiveInt(values.tokens, cpu ? 8 : 128, 'tokens');
    const maxContext = Math.max(...lengths, 128 + tokens) + 2;
    if (cpu) {
      return skippedReport(
        {
          suite: values.name ?? 'patch',
          title: 'Eager-style vs fused modules',
          description: 'Module patching end to end (layered GPU engine).',
          unit: 'ms',
        },
        'cpu',
        'patching swaps the layered GPU engine’s modules; the cpu engine has none',
        machine,
      );
    }
    return runPatchSuite({
      ...common,
      lengths,
      tokens,
      open: (e) => open(e ?? values.engine ?? 'layered', maxContext),
    });
  });
}

/** The structured suite on the model the flags name (its default engine, or --engine). */
async function benchStructured(
  values: Values,
  megakernel: MegakernelEngineOptions,
  backend: BenchBackend,
  machine: ReturnType<typeof machineInfo>,
  log: (line: string) => void,
): Promise<BenchReport> {
  const cpu = backend === 'cpu';
  const runs = positiveInt(values.runs, 3, 'runs');
  const tokens = positiveInt(values.tokens, cpu ? 12 : 128, 'tokens');
  const modelValues: ModelValues = { ...values, ...(cpu && !values.engine ? { engine: 'cpu' } : {}) };
  return withInterrupt(async (signal) =>
    runStructuredSuite({
      backend,
      runs,
      tokens,
      onProgress: log,
      machine,
      ...(values.name ? { name: values.name } : {}),
      open: async () =>
        structuredBenchModel(
          await openModel(
            { ...modelValues, 'max-context': modelValues['max-context'] ?? String(tokens + 256) },
            signal,
            megakernel,
          ),
        ),
    }),
  );
}

/** The engines an end-to-end suite measures (undefined: the model's default). */
export function engineList(
  suite: E2eSuite,
  values: Values,
  cpu: boolean,
): (string | undefined)[] | undefined {
  if (values.engines)
    return values.engines
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
  if (values.engine) {
    const e = values.engine;
    return suite === 'decode' && !values['no-layered'] && e !== 'layered' && e !== 'cpu'
      ? [e, 'layered']
      : [e];
  }
  if (cpu) return ['cpu'];
  return suite === 'decode' ? ['layered', 'megakernel'] : ['layered'];
}

/** Writes the requested outputs; `--report DIR` keeps the reports of other names already there. */
function finish(reports: BenchReport[], values: Values): void {
  if (values.json) {
    const doc = reports.length === 1 ? reports[0] : reports;
    writeFileSync(values.json, `${JSON.stringify(doc, null, 1)}\n`);
  }
  if (values.markdown)
    writeFileSync(values.markdown, `${reports.map((r) => reportMarkdown(r)).join('\n\n')}\n`);
  if (values.report) {
    const dir = values.report;
    // Reports already in DIR keep their place; a suite run again replaces its old report.
    const merged: BenchReport[] = [];
    const fresh = new Map(reports.map((r) => [r.suite, r]));
    const indexFile = join(dir, 'index.json');
    if (existsSync(indexFile)) {
      const index = JSON.parse(readFileSync(indexFile, 'utf8')) as BenchIndex;
      for (const s of index.suites) {
        const replacement = fresh.get(s.suite);
        if (replacement) {
          merged.push(replacement);
          fresh.delete(s.suite);
        } else if (existsSync(join(dir, s.file))) merged.push(readReport(join(dir, s.file)));
      }
    }
    const index = writeReports(dir, [...merged, ...fresh.values()]);
    console.error(
      `report: ${index.suites.length} suite(s) in ${dir} (README.md, index.json, JSON, Markdown, SVG)`,
    );
  }
}
