/**
 * Runs the PyTorch peer script (peers/torch_ops.py) when `python3 -c "import torch"` works and a CUDA device is
 * visible to torch. The script lives in this package; bundles ship it beside the CLI.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PeerSpec } from '../suites/op-case.js';

export interface PeerResult {
  eagerUs?: number;
  compileUs?: number;
  eagerError?: string;
  compileError?: string;
}

export interface PeerRun {
  available: boolean;
  reason?: string;
  torch?: string;
  results: Record<string, PeerResult>;
}

/** Where the peer scripts are: QK_PEERS_DIR, beside a bundle (./peers), or this package's peers/ folder. */
export function peersDir(): string {
  const candidates = [
    process.env.QK_PEERS_DIR,
    fileURLToPath(new URL('./peers', import.meta.url)),
    fileURLToPath(new URL('../peers', import.meta.url)),
    fileURLToPath(new URL('../../peers', import.meta.url)),
  ].filter((c): c is string => typeof c === 'string');
  return candidates.find((c) => existsSync(join(c, 'torch_ops.py'))) ?? candidates[candidates.length - 1]!;
}

/** Whether torch with CUDA is importable by python3, and why not. */
export function torchStatus(python = process.env.QK_PYTHON ?? 'python3'): { ok: boolean; reason?: string } {
  const r = spawnSync(python, ['-c', 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 3)'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.error) return { ok: false, reason: `${python} not found` };
  if (r.status === 3) return { ok: false, reason: 'torch sees no CUDA device' };
  if (r.status !== 0) return { ok: false, reason: 'python3 cannot import torch' };
  return { ok: true };
}

/** Runs the torch peers for `specs`, streaming progress lines to `onProgress`; `compile: false` skips torch.compile. */
export function runTorchPeers(
  specs: readonly PeerSpec[],
  options: { compile?: boolean; onProgress?: (line: string) => void } = {},
): PeerRun {
  const onProgress = options.onProgress;
  const python = process.env.QK_PYTHON ?? 'python3';
  const status = torchStatus(python);
  if (!status.ok) return { available: false, reason: status.reason ?? 'unavailable', results: {} };
  const dir = mkdtempSync(join(tmpdir(), 'qk-peers-'));
  const specPath = join(dir, 'spec.json');
  const outPath = join(dir, 'out.json');
  writeFileSync(specPath, JSON.stringify(specs));
  const args = [
    join(peersDir(), 'torch_ops.py'),
    specPath,
    outPath,
    ...(options.compile === false ? ['--no-compile'] : []),
  ];
  const r = spawnSync(python, args, {
    encoding: 'utf8',
    timeout: 1_800_000,
    maxBuffer: 64 * 2 ** 20,
  });
  for (const line of (r.stdout ?? '').split('\n')) if (line.trim()) onProgress?.(line);
  if (r.status !== 0 || !existsSync(outPath)) {
    return {
      available: false,
      reason: `torch peer script failed: ${(r.stderr ?? '').slice(-800)}`,
      results: {},
    };
  }
  const parsed = JSON.parse(readFileSync(outPath, 'utf8')) as {
    torch: string;
    results: Record<string, PeerResult>;
  };
  return { available: true, torch: parsed.torch, results: parsed.results };
}
