#!/usr/bin/env node
// Installs qk the way a user outside this workspace would, and checks it works (issue 47).
//
// 1. `pnpm pack` every publishable package (pnpm rewrites `workspace:` ranges to real versions).
// 2. For each package manager (npm, pnpm, yarn classic) and each toolkit setting (no nvcc; nvcc on PATH), make an
//    empty project that depends on the tarballs, install it, and check:
//    - the platform package @qk/cuda-core-linux-x64 arrives through @qk/cuda-core's optionalDependencies, holding a
//      stand-in binary (see standInPlatformPackage);
//    - the @qk/cuda-core install step ran and made the right decision: without nvcc, use the prebuilt binary and
//      compile nothing (and `qk info` lists it first); with nvcc and QK_CUDA_BUILD_FROM_SOURCE=1, a source build whose
//      cmake-js path resolves. QK_CUDA_DRY_RUN=1 stands in for the compile: CI's build step already compiles the addon
//      once from source, and compiling it three more times here would take ~25 minutes on 2 cores;
//    - `qk generate` on the tiny preset (CPU) prints text;
//    - one @qk/qwen3 API call, from ESM and from CommonJS: loadQwen3('tiny') and a few generated tokens.
//
// Offline: the @qk packages come from the tarballs (overrides/resolutions pin every @qk name to its tarball, so no
// @qk name is ever looked up in the registry). Their third-party dependencies (cmake-js, @huggingface/*, …) come
// from each manager's cache (--prefer-offline); a cold cache fetches them from the registry once. Fully offline is
// not possible for a first run on a machine whose caches lack them.
//
// Usage: node tooling/scripts/pack-install-test.mjs [--managers npm,pnpm,yarn] [--keep]
// Needs `pnpm build` first (the tarballs hold dist/). Ends with "pack-install: N passed, N failed".
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PNPM = 'pnpm@10.34.8';
const YARN = 'yarn@1';
const args = process.argv.slice(2);
const managersArg = args.includes('--managers') ? args[args.indexOf('--managers') + 1] : 'npm,pnpm,yarn';
const managers = managersArg.split(',');
const keep = args.includes('--keep');
const work = mkdtempSync(join(tmpdir(), 'qk-pack-install-'));
const started = Date.now();
const results = [];

function run(cmd, cmdArgs, options = {}) {
  const r = spawnSync(cmd, cmdArgs, {
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
    timeout: 300_000,
    ...options,
  });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, error: r.error };
}

function tail(text, lines = 15) {
  return text.trim().split('\n').slice(-lines).join('\n');
}

/** Publishable packages: every non-private package.json under packages/ and apps/. */
function publishable() {
  const dirs = [];
  for (const group of ['packages', 'apps']) {
    for (const name of readdirSync(join(root, group))) {
      const pj = join(root, group, name, 'package.json');
      if (!existsSync(pj)) continue;
      const pkg = JSON.parse(readFileSync(pj, 'utf8'));
      if (!pkg.private) dirs.push({ dir: join(root, group, name), pkg });
    }
  }
  return dirs;
}

/** Every file a package's `main`/`exports`/`bin`/`types` names must be in its tarball. */
function entryFiles(pkg) {
  const files = new Set();
  const walk = (v) => {
    if (typeof v === 'string') files.add(v);
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x);
  };
  walk(pkg.exports);
  walk(pkg.bin);
  for (const k of ['main', 'module', 'types']) walk(pkg[k]);
  return [...files].map((f) => f.replace(/^\.\//, ''));
}

function pack() {
  const dest = join(work, 'tarballs');
  mkdirSync(dest, { recursive: true });
  const tarballs = {};
  for (const { dir: source, pkg } of publishable()) {
    const dir = pkg.name === PLATFORM ? standInPlatformPackage(source) : source;
    const r = run('npx', ['--yes', PNPM, 'pack', '--pack-destination', dest], { cwd: dir });
    const file = readdirSync(dest).find(
      (f) =>
        f.startsWith(`${pkg.name.replace('@', '').replace('/', '-')}-${pkg.version}`) && f.endsWith('.tgz'),
    );
    if (r.status !== 0 || file === undefined) throw new Error(`pnpm pack failed in ${dir}:\n${tail(r.out)}`);
    const path = join(dest, file);
    const listing = run('tar', ['-tzf', path])
      .out.split('\n')
      .map((l) => l.replace(/^package\//, ''));
    const missing = entryFiles(pkg).filter((f) => !listing.includes(f));
    const manifest = JSON.parse(run('tar', ['-xzOf', path, 'package/package.json']).out);
    const workspaceRanges = Object.entries({
      ...manifest.dependencies,
      ...manifest.optionalDependencies,
      ...manifest.peerDependencies,
    }).filter(([, v]) => String(v).startsWith('workspace:'));
    const ok = missing.length === 0 && workspaceRanges.length === 0;
    results.push({
      name: `pack ${pkg.name}`,
      ok,
      detail: ok
        ? `${(statSync(path).size / 2 ** 20).toFixed(2)} MiB packed, ${listing.length - 1} files`
        : `missing entry files: ${missing.join(', ') || 'none'}; workspace ranges left: ${workspaceRanges.map(([k]) => k).join(', ') || 'none'}`,
    });
    tarballs[pkg.name] = path;
  }
  return tarballs;
}

const PLATFORM = '@qk/cuda-core-linux-x64';

/**
 * A copy of the platform package holding a stand-in `qk_cuda.node` (not a real addon: the release build takes ~30
 * minutes and CI has no GPU to load it on). Installs then see a prebuilt binary, so the install step must compile
 * nothing, and the loader must try it, report why it cannot load, and fall back to the CPU.
 */
function standInPlatformPackage(source) {
  const copy = join(work, 'platform-package');
  cpSync(source, copy, { recursive: true, filter: (p) => !p.includes('node_modules') });
  writeFileSync(join(copy, 'qk_cuda.node'), 'stand-in for the prebuilt addon (pack-install-test.mjs)\n');
  writeFileSync(join(copy, 'build-info.json'), '{ "standIn": true }\n');
  return copy;
}

/** A PATH without any CUDA toolkit directory, and QK_CUDA_NVCC=none so /usr/local/cuda is not found either. */
function toolkitEnv(withNvcc) {
  const base = { ...process.env, QK_CUDA_DRY_RUN: '1', npm_config_update_notifier: 'false' };
  for (const k of [
    'QK_CUDA_REQUIRED',
    'QK_CUDA_SKIP_BUILD',
    'QK_CUDA_BUILD_FROM_SOURCE',
    'QK_CUDA_NVCC',
    'CUDACXX',
  ])
    delete base[k];
  // pnpm's own environment would leak into npm/yarn (a workspace dir, a virtual store); start from a clean slate.
  for (const k of Object.keys(base))
    if (/^(npm_|PNPM_|pnpm_)/.test(k) && k !== 'npm_config_update_notifier') delete base[k];
  const path = (process.env.PATH ?? '').split(delimiter).filter((p) => !/cuda/i.test(p));
  if (withNvcc) {
    const nvcc = [
      '/usr/local/cuda/bin/nvcc',
      process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'bin/nvcc'),
    ].find((p) => p && existsSync(p));
    if (nvcc === undefined) return undefined;
    path.unshift(dirname(nvcc));
    // The prebuilt binary would win; force the source path so that its cmake-js resolution is checked.
    base.QK_CUDA_BUILD_FROM_SOURCE = '1';
  } else {
    base.QK_CUDA_NVCC = 'none';
  }
  base.PATH = path.join(delimiter);
  return base;
}

function projectManifest(tarballs) {
  const files = Object.fromEntries(Object.entries(tarballs).map(([n, p]) => [n, `file:${p}`]));
  return {
    name: 'qk-pack-install-test',
    version: '1.0.0',
    private: true,
    type: 'module',
    dependencies: Object.fromEntries(Object.entries(files).filter(([n]) => n !== PLATFORM)),
    overrides: files,
    resolutions: files,
    pnpm: { overrides: files },
  };
}

const INSTALL = {
  npm: ['npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--foreground-scripts']],
  // pnpm's side-effects cache would replay the first case's install step in the second (it keys on the package,
  // not on PATH), so it is off here.
  pnpm: ['npx', ['--yes', PNPM, 'install', '--prefer-offline', '--config.side-effects-cache=false']],
  // yarn classic keys its cache of a `file:` tarball on name and version, not content, so it would install an
  // earlier run's @qk packages: it gets a cache folder of its own per run (third-party packages then come from the
  // registry).
  yarn: [
    'npx',
    [
      '--yes',
      YARN,
      'install',
      '--non-interactive',
      '--no-lockfile',
      '--cache-folder',
      join(work, 'yarn-cache'),
    ],
  ],
};

const API_ESM = `import { loadQwen3 } from '@qk/qwen3';
const model = await loadQwen3('tiny', { engine: 'cpu' });
const { text, ids } = await model.generate('Hello', { maxTokens: 4, temperature: 0 }).result;
model.dispose();
if (ids.length !== 4) throw new Error('expected 4 tokens, got ' + ids.length);
console.log('api-esm ok: ' + JSON.stringify(text));
`;
const API_CJS = `const { loadQwen3 } = require('@qk/qwen3');
loadQwen3('tiny', { engine: 'cpu' }).then(async (model) => {
  const { ids } = await model.generate('Hi', { maxTokens: 3, temperature: 0 }).result;
  model.dispose();
  if (ids.length !== 3) throw new Error('expected 3 tokens, got ' + ids.length);
  console.log('api-cjs ok');
});
`;

function check(name, fn) {
  try {
    const detail = fn();
    results.push({ name, ok: true, detail });
  } catch (e) {
    results.push({ name, ok: false, detail: e.message });
  }
}

function installCase(manager, withNvcc, tarballs) {
  const label = `${manager}, ${withNvcc ? 'nvcc on PATH' : 'no nvcc'}`;
  const env = toolkitEnv(withNvcc);
  if (env === undefined) {
    results.push({
      name: label,
      ok: true,
      skipped: true,
      detail: 'skipped: no CUDA toolkit on this machine',
    });
    return;
  }
  const dir = join(work, `${manager}-${withNvcc ? 'nvcc' : 'plain'}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(projectManifest(tarballs), null, 2)}\n`);
  // pnpm 10 runs no dependency's install script unless allowed, and its onlyBuiltDependencies list does not match
  // a dependency installed from a tarball path (it does for a registry install: `pnpm approve-builds`).
  if (manager === 'pnpm')
    writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'dangerouslyAllowAllBuilds: true\n');
  writeFileSync(join(dir, 'api.mjs'), API_ESM);
  writeFileSync(join(dir, 'api.cjs'), API_CJS);
  const t0 = Date.now();
  const [cmd, cmdArgs] = INSTALL[manager];
  const install = run(cmd, cmdArgs, { cwd: dir, env });
  const seconds = ((Date.now() - t0) / 1000).toFixed(0);
  if (install.status !== 0) {
    results.push({ name: `${label}: install`, ok: false, detail: tail(install.out) });
    return;
  }
  results.push({ name: `${label}: install`, ok: true, detail: `${seconds} s` });
  check(`${label}: @qk/cuda-core install step`, () => {
    const planFile = join(dir, 'node_modules/@qk/cuda-core/build/native-plan.json');
    if (!existsSync(planFile)) throw new Error(`the install script did not run (no ${planFile})`);
    const plan = JSON.parse(readFileSync(planFile, 'utf8'));
    if (withNvcc) {
      if (plan.action !== 'build') throw new Error(`expected a source build, got ${JSON.stringify(plan)}`);
      if (!existsSync(plan.command[1]))
        throw new Error(`cmake-js resolved to ${plan.command[1]}, which is missing`);
      return `would build with ${plan.command[1].slice(dir.length + 1)}`;
    }
    if (plan.action !== 'prebuilt')
      throw new Error(`expected the prebuilt binary, got ${JSON.stringify(plan)}`);
    return `prebuilt ${plan.path.slice(dir.length + 1)}, nothing compiled`;
  });
  if (!withNvcc) {
    check(`${label}: qk info names the prebuilt binary first`, () => {
      const r = run(join(dir, 'node_modules/.bin/qk'), ['info'], {
        cwd: dir,
        env: { ...env, QK_CUDA_DRY_RUN: '' },
      });
      const prebuilt = /prebuilt: \S+cuda-core-linux-x64[\\/]qk_cuda\.node — the prebuilt binary/.test(r.out);
      const refused = /cuda-core-linux-x64[\\/]qk_cuda\.node cannot be loaded/.test(r.out);
      if (r.status !== 0 || !prebuilt || !refused) throw new Error(`exit ${r.status}:\n${tail(r.out)}`);
      return 'tried, refused (a stand-in), CPU fallback';
    });
  }
  const runEnv = { ...env };
  delete runEnv.QK_CUDA_DRY_RUN;
  check(`${label}: qk generate --preset tiny`, () => {
    const qk = join(dir, 'node_modules/.bin/qk');
    const r = run(qk, ['generate', 'Hello', '--preset', 'tiny', '--engine', 'cpu', '--max-tokens', '4'], {
      cwd: dir,
      env: runEnv,
    });
    if (r.status !== 0 || !/tokens at/.test(r.out)) throw new Error(`exit ${r.status}:\n${tail(r.out)}`);
    return tail(r.out, 1);
  });
  for (const script of ['api.mjs', 'api.cjs']) {
    check(`${label}: @qk/qwen3 API (${script.endsWith('mjs') ? 'ESM' : 'CommonJS'})`, () => {
      const r = run(process.execPath, [script], { cwd: dir, env: runEnv });
      if (r.status !== 0 || !/ok/.test(r.out)) throw new Error(`exit ${r.status}:\n${tail(r.out)}`);
      return tail(r.out, 1);
    });
  }
}

let crashed;
try {
  const tarballs = pack();
  for (const manager of managers) {
    if (!(manager in INSTALL)) throw new Error(`unknown manager ${manager} (npm, pnpm, yarn)`);
    for (const withNvcc of [false, true]) installCase(manager, withNvcc, tarballs);
  }
} catch (e) {
  crashed = e;
}
for (const r of results)
  console.log(`${r.skipped ? 'SKIP' : r.ok ? 'PASS' : 'FAIL'}  ${r.name}: ${r.detail}`);
if (crashed) console.log(`FAIL  ${crashed.message}`);
if (!keep) rmSync(work, { recursive: true, force: true });
else console.log(`kept ${work}`);
const failed = results.filter((r) => !r.ok).length + (crashed ? 1 : 0);
const passed = results.filter((r) => r.ok && !r.skipped).length;
console.log(
  `pack-install: ${passed} passed, ${failed} failed (${((Date.now() - started) / 1000).toFixed(0)} s) — ${failed === 0 ? 'PASS' : 'FAIL'}`,
);
process.exit(failed === 0 ? 0 : 1);
