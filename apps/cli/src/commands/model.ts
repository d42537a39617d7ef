/** `qk model`: write Qwen3 checkpoints of random weights and describe checkpoint directories. */
import { writeFile } from 'node:fs/promises';
import {
  type CheckpointDescription,
  type Comparison,
  checkEngineAvailable,
  compareTeacherForced,
  createEngine,
  defaultEngine,
  describeCheckpoint,
  ENGINE_PLACEMENT,
  isPresetName,
  PRESETS,
  type Qwen3Config,
  quantizeCheckpoint,
  readCheckpointConfig,
  readReference,
  writeRandomCheckpoint,
} from '@qk/qwen3';
import { intOption, parse, UsageError } from '../args.js';
import { withInterrupt } from '../model-options.js';
import { createProgressBar, formatBytes } from '../progress.js';
import { loadCheckpointWeights, qualityCommand } from './model-quality.js';

export const MODEL_HELP = `qk model — make and inspect Qwen3 checkpoints

Usage: qk model init --preset NAME --out DIR [options]
       qk model info DIR [--json]
       qk model compare DIR [--reference REF_DIR] [--engine NAME] [--json FILE]
       qk model quantize DIR --to int8|int4 [--group 128|64] --out DIR2
       qk model quality DIR --to int8|int4 [--group 128|64] [--steps N] [--engine NAME]

Commands:
  init     write a checkpoint of random weights (HF's initialisation) that transformers and qk both load
  info     print a checkpoint's config, parameter count, size and dtypes (qk model info --help)
  compare  check an engine against HF transformers' logits on the same checkpoint (qk model compare --help)
  quantize write an INT8/INT4 weight-only copy of a checkpoint (qk model quantize --help)
  quality  what INT8/INT4 quantization does to a checkpoint: projection errors, logit KL, argmax agreement

Run qk model init --help for init's options.`;

export const MODEL_INIT_HELP = `qk model init — write a Qwen3 checkpoint of random weights

Usage: qk model init --preset NAME --out DIR [--seed N] [--dtype bf16|f16|f32] [--shard-size SIZE] [--force]

Writes config.json, generation_config.json, the weights as safetensors (normal(0, 0.02) matrices, RMSNorm
weights of 1, the same for the same seed on every machine) and the Qwen3 tokenizer files: the layout of
transformers' save_pretrained, so AutoModelForCausalLM.from_pretrained(DIR) loads it too.

Options:
  --preset NAME      ${Object.keys(PRESETS).join(', ')}
  --out DIR          the directory to write (created if missing; must be empty unless --force)
  --seed N           seed of the weights (default 0)
  --dtype DTYPE      bf16, f16 or f32 (default bf16, as Qwen3 is published)
  --shard-size SIZE  largest safetensors file, e.g. 5GiB, 500MB, 2000000000 (default 5GiB); above it the
                     weights are sharded with a model.safetensors.index.json
  --force            replace the checkpoint files of a non-empty directory
  -h, --help         this help`;

export const MODEL_INFO_HELP = `qk model info — describe a Qwen3 checkpoint directory

Usage: qk model info DIR [--json]

Reads config.json and the safetensors headers (no weights) and prints the configuration, the number of
parameters, the size on disk and the tensor dtypes. Exits 1 when the tensors do not match the config.

Options:
  --json      print the description as JSON
  -h, --help  this help`;

export const MODEL_COMPARE_HELP = `qk model compare — an engine against Hugging Face transformers, teacher-forced

Usage: qk model compare DIR [--reference REF_DIR] [--engine NAME] [--json FILE]

Loads the checkpoint DIR into the engine, feeds it the prompt of a reference run made by HF transformers on the
same checkpoint (peers/hf_reference.py: reference.json + logits.f32), then HF's greedy tokens one at a time, and
prints per step the max and mean |logit difference| and whether the two argmaxes agree. Ends with the share of
steps that agree. Exits 1 when an engine produced a non-finite logit.

Options:
  --reference DIR  folder of reference.json (default: DIR itself, where hf_reference.py writes it)
  --engine NAME    cpu, layered or megakernel (default: megakernel where it serves the model, else
                   layered with a GPU, else cpu)
  --json FILE      also write every step as JSON
  -h, --help       this help`;

/**
 * Runs long `work` under Ctrl-C handling with a progress bar on stderr; when it fails, the half-drawn bar's line
 * is ended first so the error message starts on its own.
 */
async function withProgress<T>(
  label: string,
  work: (signal: AbortSignal, update: (done: number, total: number) => void) => Promise<T>,
): Promise<T> {
  const bar = createProgressBar(label);
  return withInterrupt(async (signal) => {
    try {
      const result = await work(signal, (done, total) => bar.update(done, total));
      bar.finish();
      return result;
    } catch (e) {
      if (process.stderr.isTTY) process.stderr.write('\n');
      throw e;
    }
  });
}

const DTYPES = ['bf16', 'f16', 'f32'] as const;
type CliDType = (typeof DTYPES)[number];

const UNITS: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** Parses `5GiB`, `500MB`, `1.5e9`, `1024` into bytes (GB is 10^9 as in transformers' max_shard_size, GiB 2^30). */
export function parseSize(text: string, option: string): number {
  const m = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = UNITS[(m?.[2] ?? '').toLowerCase() || 'b'];
  if (m === null || unit === undefined) {
    throw new UsageError(`--${option} must be a size such as 5GiB, 500MB or 2000000000, got "${text}"`);
  }
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new UsageError(`--${option} must be a positive size, got "${text}"`);
  }
  return bytes;
}

function formatCount(n: number): string {
  const scaled = n >= 1e9 ? `${(n / 1e9).toFixed(2)} B` : `${(n / 1e6).toFixed(2)} M`;
  return `${n.toLocaleString('en-US')} (${scaled})`;
}

async function initCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    preset: { type: 'string' },
    out: { type: 'string' },
    seed: { type: 'string' },
    dtype: { type: 'string' },
    'shard-size': { type: 'string' },
    force: { type: 'boolean' },
  } as const);
  if (values.help) {
    console.log(MODEL_INIT_HELP);
    return 0;
  }
  if (values.preset === undefined)
    throw new UsageError(`--preset is required (${Object.keys(PRESETS).join(', ')})`);
  if (!isPresetName(values.preset)) {
    throw new UsageError(
      `--preset: unknown preset "${values.preset}" (known: ${Object.keys(PRESETS).join(', ')})`,
    );
  }
  if (values.out === undefined) throw new UsageError('--out DIR is required');
  const dtype = values.dtype ?? 'bf16';
  if (!(DTYPES as readonly string[]).includes(dtype)) {
    throw new UsageError(`--dtype must be one of ${DTYPES.join(', ')}, got "${dtype}"`);
  }
  const seed = intOption(values.seed, 'seed') ?? 0;
  const maxShardBytes =
    values['shard-size'] === undefined ? undefined : parseSize(values['shard-size'], 'shard-size');
  const config = PRESETS[values.preset];
  const summary = await withProgress(`writing ${values.preset}`, (signal, update) =>
    writeRandomCheckpoint(values.out!, config, {
      seed,
      dtype: dtype as CliDType,
      overwrite: values.force === true,
      signal,
      ...(maxShardBytes !== undefined ? { maxShardBytes } : {}),
      onProgress: (p) => update(p.writtenBytes, p.totalBytes),
    }),
  );
  console.log(
    `Wrote Qwen3 ${values.preset} with random weights (seed ${seed}) to ${summary.dir}:\n` +
      `  ${formatCount(summary.parameters)} parameters, ${summary.dtype}, ${formatBytes(summary.tensorBytes)} in ${summary.shards} safetensors file${summary.shards === 1 ? '' : 's'}\n` +
      `  files: ${summary.files.join(', ')}`,
  );
  for (const note of summary.notes) console.log(`note: ${note}`);
  return 0;
}

function configRows(config: Qwen3Config): [string, string][] {
  const eos = config.eosTokenIds.length > 0 ? config.eosTokenIds.join(', ') : 'none';
  return [
    ['hidden size', String(config.hiddenSize)],
    ['layers', String(config.numLayers)],
    ['attention heads', `${config.numHeads} (${config.numKvHeads} key/value, head dim ${config.headDim})`],
    ['intermediate size', String(config.intermediateSize)],
    ['vocabulary', String(config.vocabSize)],
    ['max positions', String(config.maxPositionEmbeddings)],
    ['rope theta', String(config.ropeTheta)],
    ['rms norm eps', String(config.rmsNormEps)],
    ['tied embeddings', config.tieWordEmbeddings ? 'yes' : 'no'],
    ['torch dtype', config.torchDtype],
    ['bos / eos ids', `${config.bosTokenId ?? 'none'} / ${eos}`],
  ];
}

/** The human-readable `qk model info` report. */
export function formatDescription(d: CheckpointDescription): string {
  const rows = configRows(d.config).map(([k, v]) => `  ${k.padEnd(18)} ${v}`);
  const dtypes = Object.entries(d.dtypes)
    .map(([dtype, n]) => `${dtype} (${n} tensor${n === 1 ? '' : 's'})`)
    .join(', ');
  const files = d.files.length <= 3 ? ` (${d.files.map((f) => f.name).join(', ')})` : '';
  const lines = [
    `Qwen3 checkpoint ${d.dir}`,
    ...rows,
    `parameters  ${formatCount(d.parameters)}`,
    `size        ${formatBytes(d.bytes)} in ${d.files.length} file${d.files.length === 1 ? '' : 's'}${files}`,
    `dtypes      ${dtypes}`,
  ];
  if (d.problems.length > 0) {
    lines.push('problems (qk cannot load this checkpoint):', ...d.problems.map((p) => `  - ${p}`));
  }
  return lines.join('\n');
}

async function infoCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: 'boolean' } } as const, true);
  if (values.help) {
    console.log(MODEL_INFO_HELP);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      `expects one checkpoint directory, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`,
    );
  }
  const description = await describeCheckpoint(positionals[0]!);
  console.log(values.json ? JSON.stringify(description, null, 2) : formatDescription(description));
  return description.problems.length > 0 ? 1 : 0;
}

function formatComparison(c: Comparison, engine: string, dtype: string): string {
  const lines = [
    '| step | max abs diff | mean abs diff | HF argmax | ours | agree |',
    '| ---: | ---: | ---: | ---: | ---: | :---: |',
    ...c.steps.map(
      (s) =>
        `| ${s.step} | ${s.maxAbs.toExponential(2)} | ${s.meanAbs.toExponential(2)} | ${s.referenceArgmax} | ${s.argmax} | ${s.argmax === s.referenceArgmax ? 'yes' : `no (${s.margin.toFixed(3)})`} |`,
    ),
    '',
    `${engine} (${dtype}) vs HF: argmax agreement ${(c.agreement * 100).toFixed(1)}% over ${c.steps.length} steps; max |diff| ${c.maxAbs.toExponential(2)}, mean |diff| ${c.meanAbs.toExponential(2)}`,
  ];
  return lines.join('\n');
}

async function compareCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { reference: { type: 'string' }, engine: { type: 'string' }, json: { type: 'string' } } as const,
    true,
  );
  if (values.help) {
    console.log(MODEL_COMPARE_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError('expects one checkpoint directory');
  const dir = positionals[0]!;
  if (values.engine !== undefined) checkEngineAvailable(values.engine, 'model compare');
  const reference = await readReference(values.reference ?? dir);
  const config = await readCheckpointConfig(dir);
  const engineName = values.engine ?? defaultEngine(config);
  const placement = ENGINE_PLACEMENT[engineName];
  checkEngineAvailable(engineName, 'model compare', { config, dtype: placement.dtype });
  const weights = await loadCheckpointWeights(dir, config, engineName, engineName);
  const maxContext = reference.promptIds.length + reference.greedyIds.length;
  // No vocabLimit: HF's logits cover the whole vocabulary, and so must ours.
  const engine = createEngine(engineName, config, weights, { maxContext });
  try {
    const comparison = compareTeacherForced(engine, reference);
    console.log(formatComparison(comparison, engineName, placement.dtype));
    if (values.json) {
      await writeFile(
        values.json,
        `${JSON.stringify({ engine: engineName, dtype: placement.dtype, reference: reference.meta, ...comparison }, null, 1)}\n`,
      );
    }
    return Number.isFinite(comparison.maxAbs) ? 0 : 1;
  } finally {
    engine.dispose();
  }
}

export const MODEL_QUANTIZE_HELP = `qk model quantize — write a weight-only quantized copy of a Qwen3 checkpoint

Usage: qk model quantize DIR --to int8|int4 [--group 128|64] --out DIR2

Reads the bf16/f16/f32 checkpoint DIR and writes DIR2 with every decoder projection (q/k/v/o/gate/up/down)
quantized by the @qk/ops quantizers: int8 symmetric per output channel, or int4 symmetric in groups of --group
inputs. Embedding, LM head and norms keep their dtype (their error lands on every logit, and at 8B they are a
small share of the bytes). config.json gains a quantization_config ({ "quant_method": "qk", "bits", "group_size",
"modules", "format_version": 1 }); loadQwen3 / qk generate --model DIR2 load it as stored, on the cpu engine in
this version.

Options:
  --to FORMAT  int8 or int4
  --group N    int4 group size along the inputs (default 128; must be even and divide every projection's inputs)
  --out DIR2   the directory to write (created; must not hold a config.json)
  -h, --help   this help`;

async function quantizeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      to: { type: 'string' },
      group: { type: 'string' },
      out: { type: 'string' },
    } as const,
    true,
  );
  if (values.help) {
    console.log(MODEL_QUANTIZE_HELP);
    return 0;
  }
  const dir = positionals[0];
  if (dir === undefined || positionals.length > 1) throw new UsageError('expects one checkpoint directory');
  if (values.to !== 'int8' && values.to !== 'int4')
    throw new UsageError(
      `--to must be int8 or int4, got ${values.to === undefined ? 'nothing' : `"${values.to}"`}`,
    );
  if (values.out === undefined) throw new UsageError('--out DIR2 is required');
  const group = intOption(values.group, 'group');
  if (group !== undefined && values.to === 'int8') throw new UsageError('--group applies to --to int4 only');
  if (group !== undefined && (group < 2 || group % 2 !== 0))
    throw new UsageError(`--group must be an even number of at least 2, got ${group}`);
  const bits = values.to === 'int8' ? 8 : 4;
  const result = await withProgress(`quantizing ${dir} to ${values.to}`, (signal, update) =>
    quantizeCheckpoint(dir, values.out!, {
      bits,
      ...(group === undefined ? {} : { groupSize: group }),
      signal,
      onProgress: (p) => update(p.written, p.total),
    }),
  );
  console.log(
    `Wrote ${values.to}${bits === 4 ? ` (group ${result.config.group_size})` : ' (per output channel)'} weights of ${dir} to ${values.out}:\n` +
      `  files: ${result.files.map((f) => f.split('/').pop()).join(', ')}, config.json`,
  );
  return 0;
}

/** `qk model …`: `argv` is what follows `model`. Returns the exit code; throws `UsageError` for bad usage. */
export async function modelCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined)
    throw new UsageError('expects a subcommand: init, info, compare, quantize or quality');
  if (sub === '-h' || sub === '--help' || sub === 'help') {
    console.log(MODEL_HELP);
    return 0;
  }
  if (sub === 'init') return initCommand(rest);
  if (sub === 'info') return infoCommand(rest);
  if (sub === 'compare') return compareCommand(rest);
  if (sub === 'quantize') return quantizeCommand(rest);
  if (sub === 'quality') return qualityCommand(rest);
  throw new UsageError(`unknown subcommand "${sub}" (init, info, compare, quantize or quality)`);
}
