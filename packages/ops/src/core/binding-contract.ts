/**
 * What `@qk/ops` expects of the native addon beyond its types: the megakernel limits that the C++ owns
 * (csrc/megakernel/qwen3_decode.h of @qk/cuda-core). The TypeScript copies serve where there is no GPU (argument
 * checks, engine choices); the backend compares them with the addon's `megakernelLimits` when it loads the addon,
 * so that a mismatch is one clear error rather than wrong tokens.
 */
import type { Binding, MegakernelLimits } from '@qk/cuda-core';

/** The megakernel's limits as this `@qk/ops` was written for them. */
export const MEGAKERNEL_LIMITS = {
  headDim: 128,
  maxSteps: 64,
  maxTopK: 64,
  traceEventsPerLayer: 17,
} as const satisfies MegakernelLimits;

/** Why `binding` does not match what this `@qk/ops` expects of it, or undefined when it does. */
export function bindingMismatch(binding: Binding): string | undefined {
  const limits = (binding as Partial<Binding>).megakernelLimits;
  if (limits === null || typeof limits !== 'object') {
    return 'the addon exports no megakernelLimits (it was built from older sources): rebuild it with `pnpm --filter @qk/cuda-core build:native`';
  }
  const keys = Object.keys(MEGAKERNEL_LIMITS) as (keyof MegakernelLimits)[];
  const wrong = keys.filter((k) => limits[k] !== MEGAKERNEL_LIMITS[k]);
  if (wrong.length === 0) return undefined;
  const pairs = wrong.map(
    (k) => `${k} ${String(limits[k])} in the addon, ${MEGAKERNEL_LIMITS[k]} in @qk/ops`,
  );
  return `the addon's megakernel limits are not the ones @qk/ops was written for (${pairs.join('; ')}): use @qk/ops and @qk/cuda-core of one release, or rebuild the addon from the same sources`;
}
