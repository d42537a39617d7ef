#!/usr/bin/env node
// Keeps the package layers of DESIGN.md §1 true. Reads every import and re-export of every TypeScript source file
// under packages/*/src and apps/*/src (`import … from`, `import type`, `export … from`, `import()` and `typeof
// import()` in types, `require()`), and fails, listing each offending chain, on
//   (a) an import cycle inside a package (type-only imports count: they tie the modules together all the same),
//   (b) an import of a workspace package that the importer's layer may not use (LAYERS below), or a relative path
//       that reaches into another package's files, or an import of the optional addon's code by a library (TYPES_ONLY
//       below),
//   (c) an import that runs against a package's inner direction (INNER_RULES below: in @qk/ops the CUDA dispatch
//       in src/cuda/* never imports the ops in src/ops/*, which reach it only through its dispatch functions, and
//       src/core/ and src/backend/ sit below both).
// No dependencies: `node tooling/scripts/check-layers.mjs [--root DIR]`; exit 1 on any violation. `pnpm lint` runs
// it (the `lint` task of @qk/scripts).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Which workspace packages each package may import: arrows point down only (DESIGN.md §1). Built from each
 * package.json's dependencies, peerDependencies and devDependencies, with the layer order deciding the rest: @qk/bench
 * sits beside @qk/qwen3 (it measures models through its own `E2eModel` interface), so it may not import it.
 */
export const LAYERS = {
  '@qk/cuda-core': [],
  '@qk/ops': ['@qk/cuda-core'],
  '@qk/qwen3': ['@qk/ops', '@qk/cuda-core'],
  '@qk/bench': ['@qk/ops', '@qk/cuda-core'],
  '@qk/cli': ['@qk/qwen3', '@qk/bench', '@qk/ops', '@qk/cuda-core'],
  '@qk/demo': ['@qk/qwen3', '@qk/bench', '@qk/ops', '@qk/cuda-core'],
};

/**
 * Packages a library may import only types from: the addon `@qk/cuda-core` is optional, so its code reaches the
 * libraries through `@qk/ops`, which loads it lazily (`@qk/ops/internal` for the megakernel of @qk/qwen3), and a
 * library without it installed still imports and runs on the CPU. The apps bundle it, and import it outright.
 */
export const TYPES_ONLY = {
  '@qk/ops': ['@qk/cuda-core'],
  '@qk/qwen3': ['@qk/cuda-core'],
  '@qk/bench': ['@qk/cuda-core'],
};

/** Directions inside a package: a module under `from` (package-relative) may not import one under any of `to`. */
export const INNER_RULES = [
  {
    pkg: '@qk/ops',
    from: 'src/cuda/',
    to: ['src/ops/'],
    why: 'the CUDA dispatch sits below the ops that call it; move what both need to src/core/, check.ts or io.ts',
  },
  {
    pkg: '@qk/ops',
    from: 'src/ops/',
    to: ['src/cuda/common.ts'],
    why: 'the ops reach the CUDA side through its dispatch functions; what they share lives in src/core/, check.ts or io.ts',
  },
  {
    pkg: '@qk/ops',
    from: 'src/core/',
    to: ['src/ops/', 'src/cuda/', 'src/verify/', 'src/testing/'],
    why: 'src/core/ holds what the CPU ops and the CUDA dispatch share, so it sits below both',
  },
  {
    pkg: '@qk/ops',
    from: 'src/backend/',
    to: ['src/ops/', 'src/cuda/', 'src/verify/', 'src/testing/'],
    why: 'the backend loads the addon and knows no op',
  },
];

/** Folders whose packages are checked, each package's sources under `src/`. */
const GROUPS = ['packages', 'apps'];
const SOURCE_EXT = /\.(?:ts|tsx|mts|cts)$/;

// ---------------------------------------------------------------------------------------------------------
// Reading the imports of one file

const REGEX_BEFORE = new Set([...'(,=:[!&|?{};+-*%<>~^']);
const REGEX_AFTER_WORD = new Set([
  'return',
  'typeof',
  'case',
  'do',
  'else',
  'in',
  'of',
  'new',
  'delete',
  'void',
  'throw',
  'instanceof',
  'yield',
  'await',
]);

/**
 * The code of `src` with comments dropped and every string, template and regular-expression literal replaced by a
 * marker (`\u0001N\u0001` for string N of the returned list), newlines kept so offsets map to the same lines.
 */
export function maskSource(src) {
  const strings = [];
  let out = '';
  let i = 0;
  const n = src.length;
  // Template literals nest through `${ … }`: the brace depth at which each open template resumes.
  const templates = [];
  let depth = 0;
  const newlines = (s) => s.replace(/[^\n]/g, '');
  const prevSignificant = () => {
    let j = out.length - 1;
    while (j >= 0 && /\s/.test(out[j])) j--;
    if (j < 0) return { char: '', word: '' };
    let k = j;
    while (k >= 0 && /[\w$]/.test(out[k])) k--;
    return { char: out[j], word: out.slice(k + 1, j + 1) };
  };
  const readTemplate = () => {
    // At the character after a backtick or after the `}` closing a substitution.
    let j = i;
    while (j < n) {
      if (src[j] === '\\') j += 2;
      else if (src[j] === '`') {
        out += `\u0002${newlines(src.slice(i, j))}\u0002`;
        i = j + 1;
        return;
      } else if (src[j] === '$' && src[j + 1] === '{') {
        out += `\u0002${newlines(src.slice(i, j))}\u0002`;
        templates.push(depth);
        depth++;
        out += '(';
        i = j + 2;
        return;
      } else j++;
    }
    out += newlines(src.slice(i));
    i = n;
  };
  while (i < n) {
    const c = src[i];
    const d = src[i + 1];
    if (c === '/' && d === '/') {
      const end = src.indexOf('\n', i);
      i = end < 0 ? n : end;
    } else if (c === '/' && d === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? n : end + 2;
      out += ` ${newlines(src.slice(i, stop))}`;
      i = stop;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      let value = '';
      while (j < n && src[j] !== c && src[j] !== '\n') {
        if (src[j] === '\\') {
          value += src[j + 1] ?? '';
          j += 2;
        } else value += src[j++];
      }
      strings.push(value);
      out += `\u0001${strings.length - 1}\u0001${newlines(src.slice(i, j))}`;
      i = j + 1;
    } else if (c === '`') {
      i++;
      readTemplate();
    } else if (c === '/') {
      const { char, word } = prevSignificant();
      const isRegex = char === '' || REGEX_BEFORE.has(char) || (word !== '' && REGEX_AFTER_WORD.has(word));
      if (!isRegex) {
        out += c;
        i++;
        continue;
      }
      let j = i + 1;
      let inClass = false;
      while (j < n && src[j] !== '\n') {
        if (src[j] === '\\') j += 2;
        else if (inClass) {
          if (src[j] === ']') inClass = false;
          j++;
        } else if (src[j] === '[') {
          inClass = true;
          j++;
        } else if (src[j] === '/') break;
        else j++;
      }
      j++;
      while (j < n && /[a-z]/i.test(src[j])) j++;
      out += '/r/';
      i = j;
    } else if (c === '{') {
      depth++;
      out += c;
      i++;
    } else if (c === '}') {
      if (templates.length > 0 && templates[templates.length - 1] === depth - 1) {
        depth--;
        templates.pop();
        out += ')';
        i++;
        readTemplate();
      } else {
        depth = Math.max(0, depth - 1);
        out += c;
        i++;
      }
    } else {
      out += c;
      i++;
    }
  }
  return { code: out, strings };
}

const S = '\\u0001(\\d+)\\u0001';
const NOT_MEMBER = '(?<![\\w$.])';
const IMPORT_PATTERNS = [
  // import x from 'm'; import { a, type B } from 'm'; import * as ns from 'm'; import type { T } from 'm'
  {
    kind: 'import',
    re: new RegExp(`${NOT_MEMBER}import\\s+(type\\s+)?[\\w$*{}\\s,]*?\\s*from\\s*${S}`, 'g'),
  },
  // import 'm' (for its effects)
  { kind: 'import', re: new RegExp(`${NOT_MEMBER}import\\s*${S}`, 'g') },
  // export * from 'm'; export * as ns from 'm'; export { a, type B } from 'm'; export type { T } from 'm'
  {
    kind: 'export from',
    re: new RegExp(
      `${NOT_MEMBER}export\\s+(type\\s+)?(?:\\*(?:\\s+as\\s+[\\w$]+)?|\\{[^}]*\\})\\s*from\\s*${S}`,
      'g',
    ),
  },
  // import('m') in code, and typeof import('m') in types
  { kind: 'import()', re: new RegExp(`${NOT_MEMBER}import\\s*\\(\\s*${S}`, 'g') },
  { kind: 'require()', re: new RegExp(`${NOT_MEMBER}require\\s*\\(\\s*${S}`, 'g') },
];

/** Every module specifier `src` imports or re-exports from, with its line and the kind of statement. */
export function readImports(src) {
  const { code, strings } = maskSource(src);
  const found = new Map();
  for (const { kind, re } of IMPORT_PATTERNS) {
    for (const m of code.matchAll(re)) {
      const at = m.index;
      if (found.has(at)) continue;
      const typeOnly = m[1] !== undefined && /^type\s/.test(m[1]);
      const spec = strings[Number(m[m.length - 1])];
      const line = code.slice(0, at).split('\n').length;
      found.set(at, { spec, line, kind: typeOnly ? `${kind.split(' ')[0]} type` : kind });
    }
  }
  return [...found.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v);
}

// ---------------------------------------------------------------------------------------------------------
// The workspace

function listSources(dir) {
  const files = [];
  if (!existsSync(dir)) return files;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...listSources(path));
    else if (SOURCE_EXT.test(entry.name)) files.push(path);
  }
  return files.sort();
}

function readPackages(root) {
  const packages = [];
  for (const group of [...GROUPS, 'tooling']) {
    const dir = join(root, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) {
      const manifest = join(dir, name, 'package.json');
      if (!existsSync(manifest)) continue;
      const pkgName = JSON.parse(readFileSync(manifest, 'utf8')).name;
      const pkgDir = join(dir, name);
      packages.push({ name: pkgName, dir: pkgDir, checked: GROUPS.includes(group) });
    }
  }
  return packages;
}

const isFile = (p) => existsSync(p) && statSync(p).isFile();

/** The source file a relative specifier names (TypeScript's `.js` → `.ts` mapping, extensionless, `index`). */
function resolveRelative(fromFile, spec) {
  const base = resolve(dirname(fromFile), spec);
  const ext = extname(base);
  const stem = base.slice(0, base.length - ext.length);
  const candidates = {
    '.js': [`${stem}.ts`, `${stem}.tsx`, base],
    '.jsx': [`${stem}.tsx`, base],
    '.mjs': [`${stem}.mts`, base],
    '.cjs': [`${stem}.cts`, base],
  }[ext] ?? [
    base,
    `${base}.ts`,
    `${base}.tsx`,
    `${base}.mts`,
    `${base}.cts`,
    join(base, 'index.ts'),
    join(base, 'index.tsx'),
  ];
  return candidates.find(isFile);
}

function bareName(spec) {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) return undefined;
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

// ---------------------------------------------------------------------------------------------------------
// The checks

/** Strongly connected components of `graph` (Map node → Set of nodes) with a cycle, by Tarjan's algorithm. */
function cyclicComponents(graph) {
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  const visit = (v) => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.has(v)) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components;
}

/** The shortest cycle through `start` inside `members`, as a list of nodes ending back at `start`. */
function shortestCycle(graph, start, members) {
  const previous = new Map();
  const queue = [start];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [];
        for (let u = v; u !== start; u = previous.get(u)) path.push(u);
        return [start, ...path.reverse(), start];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/**
 * Checks the workspace at `root`. Returns the violations (each `{ rule, message }`, `message` being the offending
 * chain) and what was read.
 */
export function checkLayers(
  root,
  { layers = LAYERS, innerRules = INNER_RULES, typesOnly = TYPES_ONLY } = {},
) {
  const packages = readPackages(root);
  const byName = new Map(packages.map((p) => [p.name, p]));
  const rel = (p) => relative(root, p).split(sep).join('/');
  const ownerOf = (file) =>
    packages.find((p) => file.startsWith(p.dir + sep) || file === p.dir)?.name ?? undefined;
  const violations = [];
  let fileCount = 0;
  let importCount = 0;
  for (const pkg of packages.filter((p) => p.checked)) {
    const files = listSources(join(pkg.dir, 'src'));
    fileCount += files.length;
    const allowed = layers[pkg.name];
    if (allowed === undefined && files.length > 0) {
      violations.push({
        rule: 'layer',
        message: `${pkg.name} (${rel(pkg.dir)}) is not in the LAYERS table of tooling/scripts/check-layers.mjs: add it with the packages it may import`,
      });
    }
    /** Inner edges: file → Map(target → first line). */
    const edges = new Map();
    for (const file of files) {
      const targets = new Map();
      edges.set(file, targets);
      for (const { spec, line, kind } of readImports(readFileSync(file, 'utf8'))) {
        importCount++;
        const where = `${rel(file)}:${line}`;
        let target;
        let targetPkg;
        if (spec.startsWith('.')) {
          target = resolveRelative(file, spec);
          if (target === undefined) continue; // (not a source file: JSON, assets; tsc reports missing modules)
          targetPkg = ownerOf(target);
          if (targetPkg !== pkg.name) {
            violations.push({
              rule: 'layer',
              message: `${where} → ${rel(target)} (${kind} '${spec}'): reaches into ${targetPkg ?? 'a file outside the workspace packages'} by a relative path; import the package by name`,
            });
            continue;
          }
        } else {
          targetPkg = bareName(spec);
          if (targetPkg === undefined || !byName.has(targetPkg) || targetPkg === pkg.name) continue;
          if (allowed !== undefined && !allowed.includes(targetPkg)) {
            violations.push({
              rule: 'layer',
              message: `${where} → ${spec} (${kind}): ${pkg.name} may import only ${allowed.length ? allowed.join(', ') : 'no workspace package'}`,
            });
          } else if (typesOnly[pkg.name]?.includes(targetPkg) && !kind.endsWith(' type')) {
            violations.push({
              rule: 'layer',
              message: `${where} → ${spec} (${kind}): ${pkg.name} may import only types from ${targetPkg} (\`import type\`), which is optional; reach its code through @qk/ops`,
            });
          }
          continue;
        }
        if (!targets.has(target)) targets.set(target, line);
        const from = rel(file).slice(rel(pkg.dir).length + 1);
        const to = rel(target).slice(rel(pkg.dir).length + 1);
        for (const rule of innerRules) {
          if (rule.pkg !== pkg.name || !from.startsWith(rule.from)) continue;
          const bad = rule.to.find((t) => to.startsWith(t));
          if (bad !== undefined) {
            violations.push({
              rule: 'direction',
              message: `${where} → ${rel(target)} (${kind} '${spec}'): ${rule.from}* must not import ${bad}${bad.endsWith('/') ? '*' : ''} in ${pkg.name} (${rule.why})`,
            });
          }
        }
      }
    }
    const graph = new Map([...edges].map(([f, t]) => [f, new Set(t.keys())]));
    for (const component of cyclicComponents(graph)) {
      const members = new Set(component);
      const covered = new Set();
      const chains = [];
      for (const start of component) {
        if (covered.has(start)) continue;
        const cycle = shortestCycle(graph, start, members);
        for (const v of cycle) covered.add(v);
        chains.push(
          cycle
            .map((v, k) => (k < cycle.length - 1 ? `${rel(v)}:${edges.get(v).get(cycle[k + 1])}` : rel(v)))
            .join(' → '),
        );
      }
      violations.push({
        rule: 'cycle',
        message: `import cycle in ${pkg.name} (${component.length} modules): ${chains.join('; and ')}`,
      });
    }
  }
  return {
    violations,
    files: fileCount,
    imports: importCount,
    packages: packages.filter((p) => p.checked).length,
  };
}

function main(argv) {
  const at = argv.indexOf('--root');
  const root =
    at >= 0 ? resolve(argv[at + 1] ?? '.') : resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const { violations, files, imports, packages } = checkLayers(root);
  if (violations.length === 0) {
    console.log(
      `check-layers: ${files} files in ${packages} packages, ${imports} imports: no import cycle, no import up the layers, no library importing the optional addon's code, no src/cuda → src/ops import.`,
    );
    return 0;
  }
  console.error(`check-layers: ${violations.length} violation${violations.length === 1 ? '' : 's'}`);
  for (const v of violations) console.error(`  [${v.rule}] ${v.message}`);
  return 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
