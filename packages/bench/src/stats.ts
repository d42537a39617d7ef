/** Order statistics of timing samples. */
export interface Summary {
  median: number;
  p10: number;
  p90: number;
  min: number;
  samples: number;
}

/** Median / p10 / p90 / min of `values` (nearest-rank). Throws on an empty list. */
export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new Error('summarize: no samples');
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
  return { median: at(0.5), p10: at(0.1), p90: at(0.9), min: sorted[0]!, samples: sorted.length };
}
