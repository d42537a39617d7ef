/** `qk model quality`: how much INT8/INT4 quantization changes a checkpoint, measured on one engine. */
import { writeFile } from 'node:fs/promises';
import { Rng } from '@qk/ops';
import {
  checkEngineAvailable,
  compareLogits,
  createEngine,
  DEFAULT_GROUP_SIZE,
  defaultEngine,
  disposeQuantizedLayers,
  disposeWeights,
  ENGINE_PLACEMENT,
  type Engine,
  type EngineName,
  isEngineName,
  type LinearError,
  type LogitAgreement,
  linearErrors,
  loadWeights,
  type QuantizedLayer,
  type Qwen3Config,
  type Qwen3Weights,
  quantizeLinears,
  readCheckpointConfig,
  readQuantizationConfig,
} from '@qk/qwen3';
import { intOption, parse, shownValue, UsageError } from '../args.js';
import { withInterrupt } from '../model-options.js';
import { createProgressBar } from '../progress.js';

export const MODEL_QUALITY_HELP = `qk model quality — what INT8/INT4 weight-only quantization does to a checkpoint

Usage: qk model quality DIR --to int8|int4 [--group 128|64] [--steps N] [--engine NAME] [--seed N] [--json FILE]

Loads the float checkpoint DIR twice onto the engine: as it is, and with its decoder projections quantized as
qk model quantize and --weights quantize them. Prints the relative output error of every quantized projection on
8 random normal rows (mean and worst, per projection kind), then feeds both engines the same N random token ids,
one per step (teacher forcing), and prints the mean and largest KL divergence of the quantized model's next-token
distribution from the float one's, and the share of steps whose argmax is the same token. On random weights the
logits are nearly flat, so argmax agreement understates the agreement; KL is the number to compare.

Options:
  --to FORMAT      int8 (per output channel) or int4 (groups of --group inputs)
  --group N        INT4 group size (default ${DEFAULT_GROUP_SIZE}; must divide every projection's inputs)
  --steps N        teacher-forced steps (default 256)
  --engine NAME    cpu, layered or megakernel (default: the engine loadQwen3 picks for the quantized model)
  --seed N         seed of the token ids (default 0)
  --json FILE      also write the projections' errors and the logit agreement as JSON
  -h, --help       this help`;

/** What `qk model quality` measured. */
export interface QualityReport {
  readonly engine: EngineName;
  readonly bits: 8 | 4;
  readonly groupSize: number | null;
  readonly projections: readonly LinearError[];
  readonly logits: LogitAgreement;
}

/** The projections' errors by kind (q, k, v, o, gate, up, down): mean and worst over the layers. */
export function errorsByKind(errors: readonly LinearError[]): { key: string; mean: number; max: number }[] {
  const kinds = new Map<string, number[]>();
  for (const e of errors) {
    const list = kinds.get(e.key) ?? [];
    list.push(e.relError);
    kinds.set(e.key, list);
  }
  return [...kinds].map(([key, v]) => ({
    key,
    mean: v.reduce((s, x) => s + x, 0) / v.length,
    max: Math.max(...v),
  }));
}

/** The human-readable report. */
export function formatQuality(r: QualityReport): string {
  const format = r.bits === 8 ? 'INT8 per channel' : `INT4 groups of ${r.groupSize}`;
  const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
  const kinds = errorsByKind(r.projections);
  const all = r.projections.map((e) => e.relError);
  return [
    `${format} on the ${r.engine} engine`,
    '',
    '| projection | mean error | worst |',
    '| --- | ---: | ---: |',
    ...kinds.map((k) => `| ${k.key} | ${pct(k.mean)} | ${pct(k.max)} |`),
    `| all ${all.length} | ${pct(all.reduce((s, x) => s + x, 0) / Math.max(all.length, 1))} | ${pct(Math.max(...all))} |`,
    '',
    `logits over ${r.logits.steps} teacher-forced steps: KL mean ${r.logits.klMean.toExponential(2)} nats, ` +
      `max ${r.logits.klMax.toExponential(2)}; argmax agreement ${pct(r.logits.top1)}`,
  ].join('\n');
}

function parseFormat(to: string | undefined): 8 | 4 {
  if (to === 'int8') return 8;
  if (to === 'int4') return 4;
  throw new UsageError(`--to must be int8 or int4, got ${to === undefined ? 'nothing' : shownValue(to)}`);
}

/**
 * The weights of checkpoint `dir` where `engine` runs (its device and dtype), with a progress bar labelled `what` and
 * Ctrl-C handling (qk model compare and quality).
 */
export async function loadCheckpointWeights(
  dir: string,
  config: Qwen3Config,
  engine: EngineName,
  what: string,
): Promise<Qwen3Weights> {
  const placement = ENGINE_PLACEMENT[engine];
  const bar = createProgressBar(`loading ${dir} (${what})`);
  const weights = await withInterrupt((signal) =>
    loadWeights(dir, config, {
      dtype: placement.dtype,
      device: placement.device,
      signal,
      onProgress: (p) => bar.update(p.loadedBytes, p.totalBytes),
    }),
  );
  bar.finish();
  return weights;
}

export async function qualityCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      to: { type: 'string' },
      group: { type: 'string' },
      steps: { type: 'string' },
      engine: { type: 'string' },
      seed: { type: 'string' },
      json: { type: 'string' },
    } as const,
    true,
  );
  if (values.help) {
    console.log(MODEL_QUALITY_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError('expects one float checkpoint directory');
  const dir = positionals[0]!;
  const bits = parseFormat(values.to);
  const group = intOption(values.group, 'group');
  if (group !== undefined && bits === 8) throw new UsageError('--group applies to --to int4 only');
  const groupSize = bits === 4 ? (group ?? DEFAULT_GROUP_SIZE) : null;
  const steps = intOption(values.steps, 'steps') ?? 256;
  if (steps < 1) throw new UsageError('--steps must be at least 1');
  const seed = intOption(values.seed, 'seed') ?? 0;
  if (values.engine !== undefined && !isEngineName(values.engine))
    throw new UsageError(`--engine must be cpu, layered or megakernel, got ${shownValue(values.engine)}`);
  const config = await readCheckpointConfig(dir);
  const stored = await readQuantizationConfig(dir);
  if (stored !== undefined) {
    throw new UsageError(
      `${dir} holds a checkpoint quantized to int${stored.bits}; pass the float checkpoint it was made from`,
    );
  }
  const format = bits === 8 ? ({ bits: 8 } as const) : ({ bits: 4, groupSize: groupSize! } as const);
  const engineName = values.engine ?? defaultEngine(config, bits === 8 ? 'int8' : 'int4', format);
  const dtype = ENGINE_PLACEMENT[engineName].dtype;
  checkEngineAvailable(engineName, 'model quality', {
    config,
    dtype,
    weights: bits === 8 ? 'int8' : 'int4',
    format,
  });
  const maxContext = steps;
  let reference: Engine | undefined;
  let candidate: Engine | undefined;
  try {
    const base = await loadCheckpointWeights(dir, config, engineName, 'float');
    try {
      reference = createEngine(engineName, config, base, { maxContext });
    } catch (e) {
      disposeWeights(base);
      throw e;
    }
    const floats = await loadCheckpointWeights(dir, config, engineName, `${values.to}`);
    let quantized: QuantizedLayer[] | undefined;
    let projections: LinearError[];
    try {
      quantized = quantizeLinears(floats, { bits, ...(groupSize === null ? {} : { groupSize }) });
      projections = linearErrors(floats, quantized);
      candidate = createEngine(engineName, config, floats, { maxContext, quantized });
    } catch (e) {
      disposeWeights(floats);
      if (quantized !== undefined) disposeQuantizedLayers(quantized);
      throw e;
    }
    const rng = new Rng(seed);
    const ids = Array.from({ length: steps }, () => rng.nextInt(config.vocabSize));
    const report: QualityReport = {
      engine: engineName,
      bits,
      groupSize,
      projections,
      logits: compareLogits(reference, candidate, ids),
    };
    console.log(formatQuality(report));
    if (values.json) await writeFile(values.json, `${JSON.stringify({ dir, ...report }, null, 1)}\n`);
    return Number.isFinite(report.logits.klMean) ? 0 : 1;
  } finally {
    reference?.dispose();
    candidate?.dispose();
  }
}
