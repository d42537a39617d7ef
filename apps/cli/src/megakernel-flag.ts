/**
 * `--megakernel-tuning JSON|FILE`: the one way the CLI sets the megakernel's knobs, for measuring variants. The value
 * is a JSON object (inline when it starts with `{`, else the path of a file holding one) of `MegakernelTuning` fields
 * of @qk/qwen3, plus the engine's own `steps`, `until`, `screen` and a `trace` file; it is parsed and checked here,
 * once, into the `loadQwen3` options it stands for.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { QkValueError } from '@qk/ops';
import { checkMegakernelTuning, MEGAKERNEL_TUNING_FIELDS, type MegakernelEngineOptions } from '@qk/qwen3';
import { shownValue, UsageError } from './args.js';

/** `words` joined by ", " into lines of at most `width` characters, each after `indent`. */
function wrapList(words: readonly string[], indent: string, width: number): string {
  const lines = [''];
  for (const [i, w] of words.entries()) {
    const piece = `${w}${i < words.length - 1 ? ',' : ''}`;
    const line = lines.at(-1)!;
    if (line.length > 0 && indent.length + line.length + 1 + piece.length > width) lines.push(piece);
    else lines[lines.length - 1] = line.length === 0 ? piece : `${line} ${piece}`;
  }
  return lines.map((l) => indent + l).join('\n');
}

/** Help text of the flag (model options). */
export const MEGAKERNEL_TUNING_HELP = `  --megakernel-tuning JSON|FILE
                     megakernel engine, for measuring variants: a JSON object, inline ('{"inflight":2}') or
                     in a file. Engine fields: steps (per launch, 1-64, default 4), until (hand-off position
                     to the layered graph, default by model), screen (int8 LM-head screen, default true),
                     trace (a file: per-stage timings as JSON, written when the model is closed; one step
                     per launch). Kernel fields (MegakernelTuning of @qk/qwen3, each with its default and
                     range; csrc/megakernel/DESIGN.md, "Tuning"):
${wrapList(Object.keys(MEGAKERNEL_TUNING_FIELDS), ' '.repeat(21), 110)}`;

/** The flag's fields that are the engine's rather than the kernel's, by the engine option each sets. */
const ENGINE_FIELDS = {
  steps: 'megakernelSteps',
  until: 'megakernelUntil',
  screen: 'megakernelScreen',
  trace: 'megakernelTrace',
} as const;

/** The flag's JSON text: the value itself when it is an object literal, else the file it names. */
function flagText(value: string): string {
  if (value.trimStart().startsWith('{')) return value;
  try {
    return readFileSync(value, 'utf8');
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new UsageError(
      `--megakernel-tuning takes a JSON object or a file holding one; cannot read ${shownValue(value)}: ${why}`,
    );
  }
}

/** A JSON value as a usage message shows it (cut when long). */
function jsonShown(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** `name`'s value checked as an integer ≥ `min` (at most `max`). */
function engineInteger(name: string, v: unknown, min: number, max?: number): number {
  if (!Number.isSafeInteger(v) || (v as number) < min || (max !== undefined && (v as number) > max)) {
    const range = max === undefined ? `an integer ≥ ${min}` : `an integer in [${min}, ${max}]`;
    throw new UsageError(`--megakernel-tuning: "${name}" must be ${range}, got ${jsonShown(v)}`);
  }
  return v as number;
}

/**
 * The `loadQwen3` options `--megakernel-tuning` stands for (`{}` without it).
 *
 * @throws UsageError for text that is no JSON object, a file that cannot be read, an unknown field, or a value of the
 *   wrong type or out of range (naming the field and its range).
 */
export function megakernelFlag(value: string | undefined): MegakernelEngineOptions {
  if (value === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(flagText(value));
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(
      `--megakernel-tuning is not valid JSON: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError('--megakernel-tuning must be a JSON object, e.g. \'{"inflight":2,"steps":8}\'');
  }
  const kernel: Record<string, unknown> = {};
  const engine: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(parsed)) {
    if (!Object.hasOwn(ENGINE_FIELDS, name)) kernel[name] = v;
    else if (name === 'steps') engine.megakernelSteps = engineInteger(name, v, 1, 64);
    else if (name === 'until') engine.megakernelUntil = engineInteger(name, v, 0);
    else if (name === 'screen') {
      if (typeof v !== 'boolean')
        throw new UsageError(`--megakernel-tuning: "screen" must be true or false, got ${jsonShown(v)}`);
      engine.megakernelScreen = v;
    } else {
      if (typeof v !== 'string' || v.length === 0)
        throw new UsageError(`--megakernel-tuning: "trace" must be a file name, got ${jsonShown(v)}`);
      engine.megakernelTrace = (summary: unknown) =>
        writeFileSync(v, `${JSON.stringify(summary, null, 1)}\n`);
    }
  }
  try {
    engine.megakernelTuning = checkMegakernelTuning('--megakernel-tuning', kernel);
  } catch (e) {
    if (!(e instanceof QkValueError)) throw e;
    // '…argument "megakernelTuning.x" must be …' → the field as the flag's user wrote it (and, for an unknown one,
    // the engine's fields beside the kernel's).
    const field = e.arg.replace(/^megakernelTuning\./, '');
    const quoted = `"${e.arg}" `;
    const why = e.message.slice(e.message.indexOf(quoted) + quoted.length).replace(/\.$/, '');
    const known = why.startsWith('is not a megakernel tuning field')
      ? `; the engine's fields are ${Object.keys(ENGINE_FIELDS).join(', ')}`
      : '';
    throw new UsageError(`--megakernel-tuning: "${field}" ${why}${known}`);
  }
  return engine as MegakernelEngineOptions;
}
