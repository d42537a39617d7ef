import { createRequire } from 'node:module';
const require = createRequire('/work/main/apps/cli/package.json');
const { build } = require('esbuild');
await build({
  entryPoints: ['/work/main/.device/steptime/steptime.ts'], outfile: '/work/main/.device/steptime/steptime.mjs', bundle: true,
  platform: 'node', format: 'esm', target: 'node20', external: ['*.node'],
  nodePaths: ['/work/main/packages/qwen3/node_modules', '/work/main/apps/cli/node_modules'],
  banner: { js: "import { createRequire as __qkRequire } from 'node:module'; const require = __qkRequire(import.meta.url);" },
  logLevel: 'warning',
});
