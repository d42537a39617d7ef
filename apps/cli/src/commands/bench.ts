import { writeFileSync } from 'node:fs';
import { opsTable, runOpsBench } from '@qk/bench';
import { parse, UsageError } from '../args.js';
import { BENCH_DECODE_HELP, BENCH_PATCH_HELP, benchDecodeCommand, benchPatchCommand } from './bench-e2e.js';

export const BENCH_HELP = `qk bench — measure qk's kernels against the GPU's copy bandwidth and PyTorch

Usage: qk bench ops [--filter ID] [--no-peers] [--json FILE] [--markdown FILE]
       qk bench decode [options]   (qk bench decode --help)
       qk bench patch [options]    (qk bench patch --help)

Suites:
  ops   RMSNorm (the seed's eight configs), fused add+RMSNorm, RoPE, SwiGLU, decode GEMV on Qwen3-0.6B/8B
        layer shapes, decode attention. Each row: µs per call, achieved GB/s, % of the device-to-device copy
        ceiling measured in the same run, and the ratio to PyTorch eager and torch.compile measured in the
        same invocation (when python3 with torch and CUDA is available).
  decode  batch-1 greedy decode tok/s per position through loadQwen3 + generate, beside HF transformers
  patch   prefill latency and decode tok/s with eager-style vs fused RMSNorm, SwiGLU and RoPE

Options:
  --filter ID      only cases whose id contains ID (e.g. rmsnorm, gemv-8b)
  --no-peers       skip the PyTorch peers
  --json FILE      write the full report as JSON
  --markdown FILE  write the table as Markdown
  -h, --help       this help`;

export function benchCommand(argv: string[]): number | Promise<number> {
  if (argv[0] === 'decode')
    return argv.includes('--help') || argv.includes('-h')
      ? help(BENCH_DECODE_HELP)
      : benchDecodeCommand(argv.slice(1));
  if (argv[0] === 'patch')
    return argv.includes('--help') || argv.includes('-h')
      ? help(BENCH_PATCH_HELP)
      : benchPatchCommand(argv.slice(1));
  return benchOpsCommand(argv);
}

function help(text: string): number {
  console.log(text);
  return 0;
}

function benchOpsCommand(argv: string[]): number {
  const { values, positionals } = parse(
    argv,
    {
      filter: { type: 'string' },
      'no-peers': { type: 'boolean' },
      json: { type: 'string' },
      markdown: { type: 'string' },
    } as const,
    true,
  );
  if (values.help || positionals.length === 0) {
    console.log(BENCH_HELP);
    return values.help ? 0 : 2;
  }
  const suite = positionals[0];
  if (suite !== 'ops') throw new UsageError(`unknown suite "${suite}"; available: ops, decode, patch`);
  const report = runOpsBench({
    ...(values.filter ? { filter: values.filter } : {}),
    peers: !values['no-peers'],
    onProgress: (line) => console.error(`  ${line}`),
  });
  if (report.status === 'skipped') {
    console.log(`qk bench ops: skipped — ${report.skipReason}`);
    if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 1)}\n`);
    return 0;
  }
  const table = opsTable(report.rows, report.ceilingGbPerS ?? Number.NaN);
  console.log(
    `qk bench ops on ${report.gpu?.gpu} (commit ${report.host.commit ?? 'unknown'}, ${report.host.date})`,
  );
  if (!report.peers?.available) console.log(`PyTorch peers not run: ${report.peers?.reason}`);
  else console.log(`PyTorch peers: torch ${report.peers.torch}`);
  console.log(table);
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 1)}\n`);
  if (values.markdown) writeFileSync(values.markdown, `${table}\n`);
  return 0;
}
