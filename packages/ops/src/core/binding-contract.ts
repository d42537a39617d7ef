/**
 * What `@qk/ops` expects of the native addon beyond its types: the megakernel limits that the C++ owns
 * (csrc/megakernel/qwen3_decode.h of @qk/cuda-core) and the fields of the megakernel's tuning object with their
 * ranges (csrc/binding/megakernel_tuning.cc). The TypeScript copies serve where there is no GPU (argument checks,
 * engine choices, the CLI); the backend compares them with the addon's `megakernelLimits` and
 * `megakernelTuningFields` when it loads the addon, so that a mismatch is one clear error rather than wrong tokens or
 * a knob the addon ignores.
 */
import type { Binding, MegakernelLimits, MegakernelTuningField } from '@qk/cuda-core';
import { MEGAKERNEL_TUNING_FIELDS } from './megakernel-tuning.js';

/** The megakernel's limits as this `@qk/ops` was written for them. */
export const MEGAKERNEL_LIMITS = {
  headDim: 128,
  maxSteps: 64,
  maxTopK: 64,
  traceEventsPerLayer: 17,
} as const satisfies MegakernelLimits;

const REBUILD = 'rebuild it with `pnpm --filter @qk/cuda-core build:native`';
const ONE_RELEASE =
  'use @qk/ops and @qk/cuda-core of one release, or rebuild the addon from the same sources';

/** A tuning field's kind and range as one comparable line. */
function describeField(f: MegakernelTuningField | undefined): string {
  if (f === undefined || f === null || typeof f !== 'object') return 'absent';
  switch (f.kind) {
    case 'integer':
      return `an integer in [${f.min}, ${f.max}]`;
    case 'bits':
      return `bits of ${f.mask}`;
    default:
      return String(f.kind);
  }
}

/** Why the addon's tuning fields differ from {@link MEGAKERNEL_TUNING_FIELDS}, or undefined when they agree. */
function tuningMismatch(binding: Partial<Binding>): string | undefined {
  const theirs = binding.megakernelTuningFields as
    | Readonly<Record<string, MegakernelTuningField>>
    | undefined;
  if (theirs === null || typeof theirs !== 'object') {
    return `the addon exports no megakernelTuningFields (it was built from older sources): ${REBUILD}`;
  }
  const ours: Readonly<Record<string, MegakernelTuningField>> = MEGAKERNEL_TUNING_FIELDS;
  const names = [...new Set([...Object.keys(ours), ...Object.keys(theirs)])];
  const wrong = names.filter((n) => describeField(ours[n]) !== describeField(theirs[n]));
  if (wrong.length === 0) return undefined;
  const pairs = wrong.map(
    (n) => `${n}: ${describeField(theirs[n])} in the addon, ${describeField(ours[n])} in @qk/ops`,
  );
  return `the addon's megakernel tuning fields are not the ones @qk/ops was written for (${pairs.join('; ')}): ${ONE_RELEASE}`;
}

/** Why `binding` does not match what this `@qk/ops` expects of it, or undefined when it does. */
export function bindingMismatch(binding: Binding): string | undefined {
  const limits = (binding as Partial<Binding>).megakernelLimits;
  if (limits === null || typeof limits !== 'object') {
    return `the addon exports no megakernelLimits (it was built from older sources): ${REBUILD}`;
  }
  const keys = Object.keys(MEGAKERNEL_LIMITS) as (keyof MegakernelLimits)[];
  const wrong = keys.filter((k) => limits[k] !== MEGAKERNEL_LIMITS[k]);
  if (wrong.length > 0) {
    const pairs = wrong.map(
      (k) => `${k} ${String(limits[k])} in the addon, ${MEGAKERNEL_LIMITS[k]} in @qk/ops`,
    );
    return `the addon's megakernel limits are not the ones @qk/ops was written for (${pairs.join('; ')}): ${ONE_RELEASE}`;
  }
  return tuningMismatch(binding);
}
