import { writeFileSync } from 'node:fs';
import { cudaDeviceInfo, cudaStatus } from '@qk/ops';
import { formatVerifyRow, runVerify, VERIFY_HEADER } from '@qk/ops/verify';
import { intOption, parse, UsageError } from '../args.js';

export const VERIFY_HELP = `qk verify — check every CUDA kernel against its @qk/ops reference

Usage: qk verify [--filter OP] [--tags LIST] [--seed N] [--json FILE]

Runs each op over a sweep of shapes (odd sizes and the Qwen3-0.6B / Qwen3-8B layer shapes) and dtypes (bf16,
f16, f32) on fresh random inputs, with outputs poisoned (NaN) before each launch, and prints one row per case:
op, dtype, shape, relative L2 error, max abs error, tolerance, result. Exits 1 if any case fails. Without a
usable GPU it says why and reports the GPU cases as skipped (exit 0), never as passed.

Options:
  --filter OP   only ops whose name contains OP (e.g. rmsnorm, linear)
  --tags LIST   only shapes with these tags, comma-separated: odd, edge, qwen3-0.6b, qwen3-8b
  --seed N      base seed for the random inputs (default: fresh each run; printed)
  --json FILE   also write the rows as JSON
  -h, --help    this help`;

export function verifyCommand(argv: string[]): number {
  const { values } = parse(argv, {
    filter: { type: 'string' },
    tags: { type: 'string' },
    seed: { type: 'string' },
    json: { type: 'string' },
  } as const);
  if (values.help) {
    console.log(VERIFY_HELP);
    return 0;
  }
  const status = cudaStatus();
  if (status.available) {
    const d = cudaDeviceInfo();
    console.log(
      `qk verify on ${d.name} (compute ${d.computeCapability.major}.${d.computeCapability.minor}, driver ${d.driverVersion})`,
    );
  } else {
    console.log(`No usable GPU: ${status.reason}`);
    console.log('Every GPU case below is SKIPPED, not passed.');
  }
  console.log(VERIFY_HEADER);
  const seed = intOption(values.seed, 'seed');
  const tags = values.tags?.split(',').map((t) => t.trim());
  const known = ['odd', 'edge', 'qwen3-0.6b', 'qwen3-8b'] as const;
  for (const t of tags ?? []) {
    if (!(known as readonly string[]).includes(t))
      throw new UsageError(`--tags: unknown tag "${t}" (known: ${known.join(', ')})`);
  }
  const report = runVerify({
    ...(values.filter ? { filter: values.filter } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(tags ? { tags: tags as (typeof known)[number][] } : {}),
    onRow: (row) => console.log(formatVerifyRow(row)),
  });
  console.log(
    `\nseed ${report.seed}: ${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped`,
  );
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 1)}\n`);
  return report.failed > 0 ? 1 : 0;
}
