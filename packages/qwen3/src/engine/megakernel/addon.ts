/**
 * The megakernel's side of the native addon: its functions through the binding `@qk/ops` loads (`@qk/ops/internal`),
 * and what this package expects of them beyond their types, checked once when the megakernel first reaches the addon.
 * The limits are the C++'s (csrc/megakernel/qwen3_decode.h of @qk/cuda-core), the tuning fields with their ranges
 * too (csrc/binding/megakernel_tuning.cc); the TypeScript copies serve where there is no GPU (argument checks, engine
 * choices, the CLI). An addon whose copies differ is refused with one clear error rather than wrong tokens or a knob
 * it ignores.
 */
import type * as CudaCore from '@qk/cuda-core';
import type { Binding, MegakernelLimits, MegakernelTuningField } from '@qk/cuda-core';
import { QkDeviceError } from '@qk/ops';
import { cudaAddon, cudaAddonModule } from '@qk/ops/internal';
import { MEGAKERNEL_TUNING_FIELDS } from './tuning.js';

/** The megakernel's limits as this `@qk/qwen3` was written for them. */
export const MEGAKERNEL_LIMITS = {
  headDim: 128,
  maxSteps: 64,
  maxTopK: 64,
  traceEventsPerLayer: 17,
} as const satisfies MegakernelLimits;

const REBUILD = 'rebuild it with `pnpm --filter @qk/cuda-core build:native`';
const ONE_RELEASE =
  'use @qk/qwen3 and @qk/cuda-core of one release, or rebuild the addon from the same sources';

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
    (n) => `${n}: ${describeField(theirs[n])} in the addon, ${describeField(ours[n])} in @qk/qwen3`,
  );
  return `the addon's megakernel tuning fields are not the ones @qk/qwen3 was written for (${pairs.join('; ')}): ${ONE_RELEASE}`;
}

/** Why `binding` does not match what this `@qk/qwen3` expects of it, or undefined when it does. */
export function bindingMismatch(binding: Binding): string | undefined {
  const limits = (binding as Partial<Binding>).megakernelLimits;
  if (limits === null || typeof limits !== 'object') {
    return `the addon exports no megakernelLimits (it was built from older sources): ${REBUILD}`;
  }
  const keys = Object.keys(MEGAKERNEL_LIMITS) as (keyof MegakernelLimits)[];
  const wrong = keys.filter((k) => limits[k] !== MEGAKERNEL_LIMITS[k]);
  if (wrong.length > 0) {
    const pairs = wrong.map(
      (k) => `${k} ${String(limits[k])} in the addon, ${MEGAKERNEL_LIMITS[k]} in @qk/qwen3`,
    );
    return `the addon's megakernel limits are not the ones @qk/qwen3 was written for (${pairs.join('; ')}): ${ONE_RELEASE}`;
  }
  if (
    typeof (binding as Partial<Binding>).megakernelMask !== 'function' ||
    typeof (binding as Partial<Binding>).megakernelCancel !== 'function' ||
    typeof (binding as Partial<Binding>).megakernelHistory !== 'function'
  ) {
    return `the addon has no megakernelMask or megakernelHistory (it was built from older sources): ${REBUILD}`;
  }
  return tuningMismatch(binding);
}

/** The code tables of the `@qk/cuda-core` module that the megakernel reads. */
export type MegakernelCodes = Pick<typeof CudaCore, 'DTypeCode' | 'MegakernelErrorCode'>;

/** The binding last found to match (`useCudaBackend` may swap it), and its module's code tables. */
let checked: { binding: Binding; codes: MegakernelCodes } | undefined;

/**
 * Why the loaded addon cannot run this package's megakernel, or undefined when it can (see the module header).
 *
 * @throws QkDeviceError naming `op` without a usable GPU.
 */
export function megakernelAddonMismatch(op: string): string | undefined {
  const binding = cudaAddon(op) as Binding;
  if (checked?.binding === binding) return undefined;
  const codes = cudaAddonModule(op) as Partial<MegakernelCodes>;
  const { MegakernelErrorCode, DTypeCode } = codes;
  if (typeof MegakernelErrorCode !== 'object' || MegakernelErrorCode === null) {
    return `the @qk/cuda-core module lacks MegakernelErrorCode: ${ONE_RELEASE}`;
  }
  const why = bindingMismatch(binding);
  if (why === undefined) checked = { binding, codes: { MegakernelErrorCode, DTypeCode: DTypeCode! } };
  return why;
}

/** The checked addon for `op` (see {@link megakernelAddonMismatch}). */
function megakernelAddon(op: string): NonNullable<typeof checked> {
  const why = megakernelAddonMismatch(op);
  if (why !== undefined) throw new QkDeviceError(`the megakernel is unavailable: ${why}.`, op);
  return checked!;
}

/**
 * The native binding for a megakernel call of `op`.
 *
 * @throws QkDeviceError naming `op` without a usable GPU, or for an addon that does not match (the reason).
 */
export function megakernelBinding(op: string): Binding {
  return megakernelAddon(op).binding;
}

/** The binding's dtype and megakernel error codes; throws as {@link megakernelBinding}. */
export function megakernelCodes(op: string): MegakernelCodes {
  return megakernelAddon(op).codes;
}
