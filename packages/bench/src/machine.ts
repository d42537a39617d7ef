import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';

/** Commit of the code under test: QK_COMMIT (set by bundles), else `git rev-parse HEAD`, else null. */
export function gitCommit(): string | null {
  if (process.env.QK_COMMIT) return process.env.QK_COMMIT;
  if (process.env.QK_BUNDLE_COMMIT) return process.env.QK_BUNDLE_COMMIT;
  const r = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Host facts recorded in every result. */
export function hostInfo(): { node: string; cpu: string | null; commit: string | null; date: string } {
  return {
    node: process.version,
    cpu: cpus()[0]?.model ?? null,
    commit: gitCommit(),
    date: new Date().toISOString(),
  };
}
