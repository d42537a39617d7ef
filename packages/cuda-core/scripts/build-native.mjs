#!/usr/bin/env node
// Install step of @qk/cuda-core (decision in native-plan.mjs): a prebuilt binary from the platform package wins and
// nothing compiles; else, with a CUDA toolkit, cmake-js builds build/Release/qk_cuda.node; else the install still
// succeeds and says, in one sentence, that the GPU backend is not available. QK_CUDA_REQUIRED=1 turns that into a
// failure (CI sets it, so a compile error or a missing toolkit cannot pass unnoticed); QK_CUDA_BUILD_FROM_SOURCE=1
// ignores the prebuilt binary. QK_CUDA_DRY_RUN=1 resolves everything, writes build/native-plan.json and compiles
// nothing (the pack-install test uses it as the stand-in for a compile).
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { planNativeBuild, resolveCmakeJs } from './native-plan.mjs';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dryRun = process.env.QK_CUDA_DRY_RUN === '1';
const plan = planNativeBuild({ pkgDir });

function record(extra) {
  if (!dryRun) return;
  mkdirSync(join(pkgDir, 'build'), { recursive: true });
  writeFileSync(
    join(pkgDir, 'build', 'native-plan.json'),
    `${JSON.stringify({ ...plan, ...extra }, null, 1)}\n`,
  );
}

if (plan.action === 'prebuilt') {
  record({});
  console.log(`@qk/cuda-core: using the prebuilt GPU backend ${plan.path}; nothing to compile.`);
  process.exit(0);
}
if (plan.action === 'skip') {
  record({});
  console.log(`@qk/cuda-core: the GPU backend is not built because ${plan.why}; @qk/ops runs on the CPU.`);
  process.exit(plan.fail ? 1 : 0);
}

let cmakeJs;
try {
  cmakeJs = resolveCmakeJs(pkgDir);
} catch (e) {
  console.error(
    `@qk/cuda-core: cmake-js cannot be resolved from ${pkgDir} (${e.message}); reinstall @qk/cuda-core.`,
  );
  process.exit(1);
}
const args = [cmakeJs, 'compile', '--out', 'build', `--CDCMAKE_CUDA_COMPILER=${plan.nvcc}`];
if (process.env.QK_CUDA_PARALLEL) args.push('--parallel', process.env.QK_CUDA_PARALLEL);
if (dryRun) {
  record({ command: [process.execPath, ...args] });
  console.log(`@qk/cuda-core: QK_CUDA_DRY_RUN=1: would run ${args.join(' ')}`);
  process.exit(0);
}
mkdirSync(join(pkgDir, 'build'), { recursive: true });
const started = Date.now();
const result = spawnSync(process.execPath, args, {
  cwd: pkgDir,
  stdio: ['ignore', 'pipe', 'pipe'],
  encoding: 'utf8',
});
const log = `${result.stdout ?? ''}${result.stderr ?? ''}`;
writeFileSync(join(pkgDir, 'build', 'build.log'), log);
if (result.status !== 0) {
  console.error(
    log
      .split('\n')
      .filter((l) => /error|Error|FAILED/.test(l))
      .slice(0, 40)
      .join('\n'),
  );
  console.error(`@qk/cuda-core: the native build failed (full log: ${join(pkgDir, 'build', 'build.log')}).`);
  process.exit(1);
}
// Keep the compiler's register/spill report across incremental builds (scripts/resource-report.mjs reads it).
const ptxas = log.split('\n').filter((l) => l.startsWith('ptxas info') || /bytes stack frame/.test(l));
if (ptxas.length > 0) appendFileSync(join(pkgDir, 'build', 'ptxas.log'), `${ptxas.join('\n')}\n`);
console.log(
  `@qk/cuda-core: built build/Release/qk_cuda.node with ${plan.nvcc} in ${((Date.now() - started) / 1000).toFixed(0)} s.`,
);
