/**
 * Checking an engine against Hugging Face transformers, the oracle no one here wrote. A reference run (made by
 * `packages/qwen3/oracle/hf_reference.py` on the same checkpoint) holds a prompt, HF's greedy tokens after it and
 * HF's logits at every step. The engine is fed the prompt and then HF's tokens one at a time (teacher forcing), so
 * every step compares logits of identical contexts even where the two argmaxes differ.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { QkCheckpointError } from './errors.js';
import type { Engine } from './types.js';

/** A reference run: prompt ids, HF's greedy ids, HF's logits per step (`[steps, vocab]`, float32). */
export interface ReferenceRun {
  readonly promptIds: readonly number[];
  /** The tokens fed after the prompt, one per step (teacher forcing). */
  readonly greedyIds: readonly number[];
  /**
   * The reference's own argmax at every step. Equal to `greedyIds` for a run that made its tokens itself; a run
   * teacher-forced with another run's tokens (`hf_reference.py --from`, e.g. HF in float32 fed HF bf16's tokens)
   * records its own here, in `argmaxIds`.
   */
  readonly argmaxIds: readonly number[];
  readonly vocab: number;
  /** Argmax is taken over ids below this (ids the tokenizer can print). */
  readonly argmaxLimit: number;
  readonly logits: Float32Array;
  /** Whatever else reference.json records (versions, dtype, device). */
  readonly meta: Readonly<Record<string, unknown>>;
}

/** Reads `reference.json` and its logits file from `dir`, checking that the sizes agree. */
export async function readReference(dir: string): Promise<ReferenceRun> {
  const file = join(dir, 'reference.json');
  let meta: Record<string, unknown>;
  try {
    meta = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new QkCheckpointError(
      `cannot read the HF reference (${(e as Error).message}); make one with oracle/hf_reference.py.`,
      file,
    );
  }
  const ids = (k: string): number[] => {
    const v = meta[k];
    if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x) && x >= 0)) {
      throw new QkCheckpointError(`"${k}" must be an array of token ids.`, file);
    }
    return v as number[];
  };
  const promptIds = ids('promptIds');
  const greedyIds = ids('greedyIds');
  const argmaxIds = meta.argmaxIds === undefined ? greedyIds : ids('argmaxIds');
  if (argmaxIds.length !== greedyIds.length) {
    throw new QkCheckpointError(
      `has ${argmaxIds.length} "argmaxIds" for ${greedyIds.length} steps; they must be one per step.`,
      file,
    );
  }
  const vocab = Number(meta.vocab);
  const argmaxLimit = Number(meta.argmaxLimit ?? vocab);
  if (!Number.isInteger(vocab) || vocab < 1 || promptIds.length === 0) {
    throw new QkCheckpointError('needs a positive "vocab" and a non-empty prompt.', file);
  }
  const logitsPath = join(dir, String(meta.logitsFile ?? 'logits.f32'));
  const raw = await readFile(logitsPath).catch((e: Error) => {
    throw new QkCheckpointError(`cannot read the reference logits (${e.message}).`, logitsPath);
  });
  if (raw.byteLength !== greedyIds.length * vocab * 4) {
    throw new QkCheckpointError(
      `holds ${raw.byteLength} bytes; ${greedyIds.length} steps × ${vocab} logits × 4 bytes were expected.`,
      logitsPath,
    );
  }
  const logits = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  return { promptIds, greedyIds, argmaxIds, vocab, argmaxLimit, logits, meta };
}

/** One step of a teacher-forced comparison. */
export interface StepComparison {
  readonly step: number;
  readonly maxAbs: number;
  readonly meanAbs: number;
  readonly referenceArgmax: number;
  readonly argmax: number;
  /** Our logit of HF's argmax minus our maximum: how far from agreeing a disagreement was (0 when they agree). */
  readonly margin: number;
}

/** The whole comparison: per-step rows and the summary the closing note reports. */
export interface Comparison {
  readonly steps: readonly StepComparison[];
  readonly agreement: number;
  readonly maxAbs: number;
  readonly meanAbs: number;
}

function argmaxBelow(row: Float32Array, limit: number): number {
  let best = 0;
  for (let i = 1; i < limit; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/**
 * Teacher-forced comparison: step 0 is the prompt's last position, step t the position of HF's greedy token t−1.
 * `onStep` sees each row as it is computed (progress).
 */
export function compareTeacherForced(
  engine: Engine,
  ref: ReferenceRun,
  onStep?: (row: StepComparison) => void,
): Comparison {
  if (engine.config.vocabSize !== ref.vocab) {
    throw new QkCheckpointError(
      `the reference has a vocabulary of ${ref.vocab} but the model ${engine.config.vocabSize}: they are not the same checkpoint.`,
    );
  }
  const steps: StepComparison[] = [];
  const p = ref.promptIds.length;
  for (let t = 0; t < ref.greedyIds.length; t++) {
    const ours =
      t === 0 ? engine.logits(ref.promptIds, 0) : engine.logits([ref.greedyIds[t - 1]!], p + t - 1);
    const theirs = ref.logits.subarray(t * ref.vocab, (t + 1) * ref.vocab);
    let maxAbs = 0;
    let sum = 0;
    for (let i = 0; i < ref.vocab; i++) {
      const d = Math.abs(ours[i]! - theirs[i]!);
      if (!(d <= maxAbs)) maxAbs = d; // NaN sticks
      sum += d;
    }
    const argmax = argmaxBelow(ours, ref.argmaxLimit);
    const referenceArgmax = ref.argmaxIds[t]!;
    const row = {
      step: t,
      maxAbs,
      meanAbs: sum / ref.vocab,
      referenceArgmax,
      argmax,
      margin: ours[referenceArgmax]! - ours[argmax]!,
    };
    steps.push(row);
    onStep?.(row);
  }
  const agree = steps.filter((s) => s.argmax === s.referenceArgmax).length;
  return {
    steps,
    agreement: agree / steps.length,
    maxAbs: steps.reduce((m, s) => (s.maxAbs > m || Number.isNaN(s.maxAbs) ? s.maxAbs : m), 0),
    meanAbs: steps.reduce((m, s) => m + s.meanAbs, 0) / steps.length,
  };
}
