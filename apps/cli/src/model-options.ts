/**
 * What `qk generate` and `qk chat` share: the model and sampling options, loading with a progress bar, the
 * notice about random weights, and the stats line.
 */
import {
  defaultEngine,
  type EngineName,
  type GenerateOptions,
  type GenerationStats,
  isEngineName,
  isPresetName,
  loadQwen3,
  PRESETS,
  type Qwen3Model,
} from '@qk/qwen3';
import { intOption, type OptionValues, shownValue, UsageError } from './args.js';
import { createProgressBar, type ProgressBar } from './progress.js';

/** `parseArgs` options of the model and sampling flags. */
export const MODEL_OPTIONS = {
  model: { type: 'string' },
  preset: { type: 'string' },
  engine: { type: 'string' },
  weights: { type: 'string' },
  'max-tokens': { type: 'string' },
  temperature: { type: 'string' },
  'top-k': { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string' },
  'max-context': { type: 'string' },
  'no-think': { type: 'boolean' },
  'parse-special': { type: 'boolean' },
  'skip-checks': { type: 'boolean' },
} as const;

/** Help text of {@link MODEL_OPTIONS}' model flags. */
export const MODEL_HELP = `Model:
  --model DIR|ID     a Hugging Face Qwen3 checkpoint directory (config.json + *.safetensors), or a hub id
                     (OWNER/NAME, e.g. Qwen/Qwen3-0.6B) loaded from the hub cache, downloaded on first use (qk pull)
  --preset NAME      random weights of a preset shape: ${Object.keys(PRESETS).join(', ')} (the text is meaningless)
                     default without --model: tiny on the cpu engine, 0.6b on a GPU engine
  --engine NAME      cpu, layered or megakernel (default: megakernel where it serves the model: an sm_90
                     GPU, bf16, a 0.6B–8B shape; else layered with a GPU, else cpu; layered to patch
                     modules)
  --weights FORMAT   bf16 (default), int8 or int4: quantize the decoder projections at load (int4 in groups
                     of 128); a checkpoint from qk model quantize loads as stored. Quantized weights run
                     on the cpu engine in this version
  --max-context N    KV-cache rows: prompt + reply (default min(model limit, 4096))
  --skip-checks      load without checking the weights for NaN/Inf or the model's size against free memory`;

/** Help text of {@link MODEL_OPTIONS}' sampling flags. */
export const SAMPLING_HELP = `Sampling (defaults: the model's generation_config.json, else temperature 0.6, top-k 20, top-p 0.95):
  --max-tokens N     most tokens per reply (default 256)
  --temperature T    0 is greedy
  --top-k K          0 keeps every token
  --top-p P          in (0, 1]; 1 keeps every token
  --seed N           sampling seed (default 0: runs repeat exactly)
  --no-think         Qwen3's non-thinking mode (an empty <think> block)
  --parse-special    with the chat template: read special-token text in messages (<|im_start|>, …) as control
                     tokens (default: as plain text, so a message cannot open a turn of another role)`;

/** Help text of {@link MODEL_OPTIONS}. */
export const MODEL_OPTIONS_HELP = `${MODEL_HELP}\n\n${SAMPLING_HELP}`;

export type ModelValues = OptionValues<typeof MODEL_OPTIONS>;

function floatOption(value: string | undefined, name: string, valid: (x: number) => boolean, range: string) {
  if (value === undefined) return undefined;
  // Plain decimal notation only: Number() would also take '', ' ', '0x1', 'Infinity'.
  const x = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(x) || !valid(x)) {
    throw new UsageError(`--${name} must be a number ${range}, got ${shownValue(value)}`);
  }
  return x;
}

/** The sampling flags as {@link GenerateOptions} (absent flags stay absent, so the model's defaults apply). */
export function samplingOptions(values: ModelValues): GenerateOptions {
  const maxTokens = intOption(values['max-tokens'], 'max-tokens');
  if (maxTokens === 0) throw new UsageError('--max-tokens must be at least 1');
  const options: Record<string, number | undefined> = {
    maxTokens,
    temperature: floatOption(values.temperature, 'temperature', (x) => x >= 0, '>= 0 (0 is greedy)'),
    topK: intOption(values['top-k'], 'top-k'),
    topP: floatOption(values['top-p'], 'top-p', (x) => x > 0 && x <= 1, 'in (0, 1]'),
    seed: intOption(values.seed, 'seed'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as GenerateOptions;
}

/** Which model and engine the flags ask for, checked, before anything loads. */
export function modelChoice(values: ModelValues): {
  source: string;
  /** The engine asked for; absent: loadQwen3 picks the default for the model. */
  engine?: EngineName;
  /** `--weights`; absent: the checkpoint's own format (bf16 for a float checkpoint). */
  weights?: 'bf16' | 'int8' | 'int4';
  maxContext?: number;
} {
  if (values.model !== undefined && values.preset !== undefined) {
    throw new UsageError('give --model DIR or --preset NAME, not both');
  }
  const engine = values.engine;
  if (engine !== undefined && !isEngineName(engine))
    throw new UsageError(`--engine must be cpu, layered or megakernel, got ${shownValue(engine)}`);
  if (values.preset !== undefined && !isPresetName(values.preset)) {
    throw new UsageError(
      `unknown preset ${shownValue(values.preset)} (known: ${Object.keys(PRESETS).join(', ')})`,
    );
  }
  const weights = values.weights;
  if (weights !== undefined && weights !== 'bf16' && weights !== 'int8' && weights !== 'int4')
    throw new UsageError(`--weights must be bf16, int8 or int4, got ${shownValue(weights)}`);
  const quantized = weights === 'int8' || weights === 'int4';
  if (quantized && engine !== undefined && engine !== 'cpu') {
    throw new UsageError(
      `--weights ${weights} runs on the cpu engine in this version; drop --engine ${engine} or use --weights bf16`,
    );
  }
  const source =
    values.model ??
    values.preset ??
    ((engine ?? (quantized ? 'cpu' : defaultEngine())) === 'cpu' ? 'tiny' : '0.6b');
  const maxContext = intOption(values['max-context'], 'max-context');
  if (maxContext === 0) throw new UsageError('--max-context must be at least 1');
  return {
    source,
    ...(engine === undefined ? {} : { engine }),
    ...(weights === undefined ? {} : { weights }),
    ...(maxContext === undefined ? {} : { maxContext }),
  };
}

/**
 * Loads the model the flags name, drawing a progress bar on stderr, and prints one line when its weights are
 * random. `signal` aborts the load (Ctrl-C).
 */
export async function openModel(values: ModelValues, signal?: AbortSignal): Promise<Qwen3Model> {
  const { source, engine, weights, maxContext } = modelChoice(values);
  const bar = createProgressBar(`loading ${source}${engine === undefined ? '' : ` (${engine})`}`);
  // A hub id not yet in the cache downloads first (qk pull's bar), then loads.
  let pulling: ProgressBar | undefined;
  let pulled = false;
  const pullProgress = (done: number, total: number) => {
    if (pulled) return;
    pulling ??= createProgressBar(`pulling ${source}`);
    pulling.update(done, total);
  };
  const endPull = () => {
    if (!pulled) pulling?.finish();
    pulled = true;
  };
  const model = await loadQwen3(source, {
    hub: { onProgress: (p) => pullProgress(p.loadedBytes, p.totalBytes) },
    ...(engine === undefined ? {} : { engine }),
    ...(weights === undefined ? {} : { weights }),
    ...(maxContext === undefined ? {} : { maxContext }),
    ...(values['skip-checks'] ? { checkWeights: false, checkMemory: false } : {}),
    onLoadProgress: (p) => {
      endPull();
      bar.update(p.loadedBytes, p.totalBytes);
    },
    ...(signal === undefined ? {} : { signal }),
  });
  bar.finish();
  if (model.randomWeights) {
    process.stderr.write(
      `note: the "${source}" preset has random weights, so the text is meaningless; pass --model DIR (a Hugging Face Qwen3 checkpoint directory) for real output.\n`,
    );
  }
  return model;
}

/** One line of stats for stderr. */
export function formatStats(stats: GenerationStats): string {
  const ms = (x: number) => `${x.toFixed(x < 10 ? 1 : 0)} ms`;
  return [
    `prompt ${stats.promptTokens} tokens`,
    `prefill ${ms(stats.prefillMs)}`,
    `TTFT ${ms(stats.timeToFirstTokenMs)}`,
    `${stats.generatedTokens} tokens at ${stats.decodeTokensPerSecond.toFixed(1)} tok/s`,
    `finish: ${stats.finishReason}`,
  ].join(' · ');
}

/**
 * Runs `work` with an AbortSignal that the first Ctrl-C fires (a second Ctrl-C exits at once, as usual).
 */
export async function withInterrupt<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const handlers = new Map<NodeJS.Signals, () => void>();
  const stop = () => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
  };
  for (const [signal, why] of [
    ['SIGINT', 'interrupted (Ctrl-C)'],
    ['SIGTERM', 'terminated (SIGTERM)'],
  ] as const) {
    const handler = () => {
      stop();
      controller.abort(new Error(why));
    };
    handlers.set(signal, handler);
    process.on(signal, handler);
  }
  try {
    return await work(controller.signal);
  } finally {
    stop();
  }
}
