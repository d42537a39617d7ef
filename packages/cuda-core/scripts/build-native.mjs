#!/usr/bin/env node
// Builds the native addon with cmake-js when a CUDA toolkit is present. Without nvcc the install still
// succeeds and says, in one sentence, that the GPU backend was not built. QK_CUDA_REQUIRED=1 turns that into a
// failure (CI sets it, so a compile error or a missing toolkit cannot pass unnoticed).
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const required = process.env.QK_CUDA_REQUIRED === '1';
const skip = process.env.QK_CUDA_SKIP_BUILD === '1';

function findNvcc() {
  const candidates = [
    process.env.CUDACXX,
    process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'bin', 'nvcc'),
    '/usr/local/cuda/bin/nvcc',
  ];
  for (const c of candidates) if (c && existsSync(c)) return c;
  const which = spawnSync('sh', ['-c', 'command -v nvcc'], { encoding: 'utf8' });
  return which.status === 0 ? which.stdout.trim() : null;
}

const nvcc = skip ? null : findNvcc();
if (!nvcc) {
  const why = skip
    ? 'QK_CUDA_SKIP_BUILD=1 is set'
    : 'no CUDA compiler (nvcc) was found on PATH, CUDACXX or CUDA_HOME';
  console.log(`@qk/cuda-core: the GPU backend is not built because ${why}; @qk/ops runs on the CPU.`);
  process.exit(required ? 1 : 0);
}

const cmakeJs = join(pkgDir, 'node_modules', 'cmake-js', 'bin', 'cmake-js');
const args = [cmakeJs, 'compile', '--out', 'build', `--CDCMAKE_CUDA_COMPILER=${nvcc}`];
if (process.env.QK_CUDA_PARALLEL) args.push('--parallel', process.env.QK_CUDA_PARALLEL);
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
  `@qk/cuda-core: built build/Release/qk_cuda.node with ${nvcc} in ${((Date.now() - started) / 1000).toFixed(0)} s.`,
);
