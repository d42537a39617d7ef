import type { VerifyRow } from './types.js';

export const VERIFY_HEADER =
  '| op | dtype | shape | rel L2 | max abs | tolerance (rtol / atol) | result |\n| --- | --- | --- | ---: | ---: | --- | --- |';

const num = (v: number | null) => (v === null ? '—' : v === 0 ? '0' : v.toExponential(2));

/** One Markdown table row. */
export function formatVerifyRow(r: VerifyRow): string {
  const result =
    r.status === 'pass'
      ? r.op === 'runtime' && r.note
        ? `pass (${r.note})`
        : 'pass'
      : r.status === 'skipped'
        ? `skipped (${r.note})`
        : `**${r.status.toUpperCase()}**${r.note ? ` ${r.note}` : ''}`;
  return `| ${r.op} | ${r.dtype} | ${r.shape} | ${num(r.relL2)} | ${num(r.maxAbs)} | ${r.rtol} / ${r.atol} | ${result} |`;
}
