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
import { MEGAKERNEL_TUNING_HELP, megakernelFlag } from './megakernel-flag.js';
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
  'min-p': { type: 'string' },
  'presence-penalty': { type: 'string' },
  'frequency-penalty': { type: 'string' },
  'repetition-penalty': { type: 'string' },
  'logit-bias': { type: 'string' },
  seed: { type: 'string' },
  'max-context': { type: 'string' },
  'prefill-chunk': { type: 'string' },
  'no-think': { type: 'boolean' },
  'parse-special': { type: 'boolean' },
  'skip-checks': { type: 'boolean' },
  'megakernel-tuning': { type: 'string' },
} as const;

/** Help text of {@link MODEL_OPTIONS}' model flags. */
export const MODEL_HELP = `Model:
  --model DIR|ID     a Hugging Face Qwen3 checkpoint directory (config.json + *.safetensors), or a hub id
                     (OWNER/NAME, e.g. Qwen/Qwen3-0.6B) loaded from the hub cache, downloaded on first use (qk pull)
  --preset NAME      random weights of a preset shape: ${Object.keys(PRESETS).join(', ')} (the text is meaningless)
                     default without --model: tiny on the cpu engine, 0.6b on a GPU engine
  --engine NAME      cpu, layered or megakernel (default: megakernel where it serves the model: an sm_90
                     GPU, a 0.6B–8B shape, any --weights; else layered with a GPU, else cpu; layered to
                     patch modules)
  --weights FORMAT   bf16 (default), int8 or int4: quantize the decoder projections at load (int4 in groups
                     of 128); a quantized checkpoint (qk model quantize, AWQ, GPTQ) loads as stored.
                     Every engine runs them; the megakernel dequantises the codes under its weight stream
  --max-context N    KV-cache rows: prompt + reply (default min(model limit, 4096))
  --prefill-chunk N  GPU engines: prompt tokens per prefill pass (default 4096); smaller needs less GPU
                     memory for long prompts
  --skip-checks      load without checking the weights for NaN/Inf or the model's size against free memory
${MEGAKERNEL_TUNING_HELP}`;

/** Help text of {@link MODEL_OPTIONS}' sampling flags. */
export const SAMPLING_HELP = `Sampling (defaults: the model's generation_config.json, else temperature 0.6, top-k 20, top-p 0.95):
  --max-tokens N     most tokens per reply (default 256)
  --temperature T    0 is greedy
  --top-k K          0 keeps every token
  --top-p P          in (0, 1]; 1 keeps every token
  --min-p P          in [0, 1]: drop tokens less likely than P × the most likely one (default 0: off)
  --presence-penalty P
                     in [-2, 2]: subtract P from the logit of every token already generated (default 0).
                     Qwen3's model card suggests 0–2 (1.5 for its quantized models) against endless
                     repetition; high values can mix languages
  --frequency-penalty F
                     in [-2, 2]: subtract F per earlier occurrence of a generated token (default 0)
  --repetition-penalty R
                     > 0: HF's penalty over the prompt and reply tokens; above 1 discourages repeats
                     (default 1: off)
  --logit-bias ID=B[,ID=B…]
                     add B (in [-100, 100]) to token ID's logit: -100 all but bans it, 100 all but forces it
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
  const penalty = (name: 'presence-penalty' | 'frequency-penalty') =>
    floatOption(values[name], name, (x) => x >= -2 && x <= 2, 'in [-2, 2]');
  const options: Record<string, number | Record<string, number> | undefined> = {
    maxTokens,
    temperature: floatOption(values.temperature, 'temperature', (x) => x >= 0, '>= 0 (0 is greedy)'),
    topK: intOption(values['top-k'], 'top-k'),
    topP: floatOption(values['top-p'], 'top-p', (x) => x > 0 && x <= 1, 'in (0, 1]'),
    minP: floatOption(values['min-p'], 'min-p', (x) => x >= 0 && x <= 1, 'in [0, 1]'),
    presencePenalty: penalty('presence-penalty'),
    frequencyPenalty: penalty('frequency-penalty'),
    repetitionPenalty: floatOption(values['repetition-penalty'], 'repetition-penalty', (x) => x > 0, '> 0'),
    logitBias: logitBiasOption(values['logit-bias']),
    seed: intOption(values.seed, 'seed'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as GenerateOptions;
}

/** `--logit-bias 123=-100,456=2.5` as `{ "123": -100, "456": 2.5 }` (ids are checked against the model later). */
function logitBiasOption(value: string | undefined): Record<string, number> | undefined {
  if (value === undefined) return undefined;
  const bias: Record<string, number> = {};
  for (const pair of value.split(',')) {
    const m = /^\s*(\d+)\s*=\s*(\S+)\s*$/.exec(pair);
    if (m === null) {
      throw new UsageError(
        `--logit-bias takes ID=BIAS pairs separated by commas (e.g. 151645=-100), got ${shownValue(pair)}`,
      );
    }
    bias[m[1]!] = floatOption(
      m[2],
      'logit-bias',
      (x) => x >= -100 && x <= 100,
      `in [-100, 100] for token ${m[1]}`,
    )!;
  }
  return bias;
}

/** Which model and engine the flags ask for, checked, before anything loads. */
export function modelChoice(values: ModelValues): {
  source: string;
  /** The engine asked for; absent: loadQwen3 picks the default for the model. */
  engine?: EngineName;
  /** `--weights`; absent: the checkpoint's own format (bf16 for a float checkpoint). */
  weights?: 'bf16' | 'int8' | 'int4';
  maxContext?: number;
  prefillChunk?: number;
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
  const source = values.model ?? values.preset ?? ((engine ?? defaultEngine()) === 'cpu' ? 'tiny' : '0.6b');
  const maxContext = intOption(values['max-context'], 'max-context');
  if (maxContext === 0) throw new UsageError('--max-context must be at least 1');
  const prefillChunk = intOption(values['prefill-chunk'], 'prefill-chunk');
  if (prefillChunk === 0) throw new UsageError('--prefill-chunk must be at least 1');
  return {
    source,
    ...(engine === undefined ? {} : { engine }),
    ...(weights === undefined ? {} : { weights }),
    ...(maxContext === undefined ? {} : { maxContext }),
    ...(prefillChunk === undefined ? {} : { prefillChunk }),
  };
}

/**
 * Loads the model the flags name, drawing a progress bar on stderr, and prints one line when its weights are
 * random. `signal` aborts the load (Ctrl-C). `megakernel`: the options of `--megakernel-tuning` where the caller
 * parsed the flag already (a command that opens several models checks it once, before anything runs).
 */
export async function openModel(
  values: ModelValues,
  signal?: AbortSignal,
  megakernel = megakernelFlag(values['megakernel-tuning']),
): Promise<Qwen3Model> {
  const { source, engine, weights, maxContext, prefillChunk } = modelChoice(values);
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
    ...(prefillChunk === undefined ? {} : { prefillChunk }),
    ...(values['skip-checks'] ? { checkWeights: false, checkMemory: false } : {}),
    ...megakernel,
    onLoadProgress: (p) => {
      endPull();
      bar.update(p.loadedBytes, p.totalBytes);
    },
    ...(signal === undefined ? {} : { signal }),
  });
  bar.finish();
  const info = model.weightInfo;
  if (info !== undefined && info.format !== 'bf16') {
    // What quantization bought, in the memory the engine holds: a quantized load says so once.
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
    process.stderr.write(
      `weights: ${info.format} decoder projections ${mib(info.projectionBytes)}, embedding, LM head and norms ${mib(info.otherBytes)} (${model.engine} engine)\n`,
    );
  }
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
