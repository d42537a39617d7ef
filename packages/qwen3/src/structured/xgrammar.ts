/**
 * Loading xgrammar's WebAssembly build (`@mlc-ai/web-xgrammar`, Apache-2.0) in Node, and turning its failures into
 * sentences.
 *
 * Why not a plain `import`: the package ships one UMD script in a package marked `"type": "module"`, so Node loads
 * it as an ES module, where the UMD's CommonJS branch is skipped and its Node branch calls `require`, which ES
 * modules do not have. The script is a CommonJS script in substance; we compile it as one (its own text, unchanged, through
 * Node's CommonJS loader), and give it a `console` of ours so the reason
 * xgrammar prints before it aborts (an unsupported schema keyword, an EBNF syntax error) ends up in our error.
 *
 * Why instances can be replaced: xgrammar reports bad input by aborting its WebAssembly runtime (a C++ exception
 * the build does not catch). Calls keep working afterwards, but whatever the aborted call had allocated stays
 * allocated and its state is not guaranteed, so after a failure the instance is retired: the next request loads a
 * fresh one (tens of milliseconds, plus the tokenizer's preprocessing).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as XGrammarApi from '@mlc-ai/web-xgrammar';
import { QkValueError } from '@qk/ops';

/** The package's exports. */
export type XGrammar = typeof XGrammarApi;

/** The package whose `lib/index.js` is loaded. */
export const XGRAMMAR_PACKAGE = '@mlc-ai/web-xgrammar';

/** Where a bundle (DESIGN.md §5) keeps the script: `xgrammar/index.js` beside the main script. */
export const BUNDLED_XGRAMMAR = path.join('xgrammar', 'index.js');

/** One loaded copy of the WebAssembly module, and the last lines it printed to stderr. */
export interface XGrammarInstance {
  readonly api: XGrammar;
  /** Runs `call`, turning an xgrammar abort into `QkValueError` (and retiring this instance). */
  run<T>(op: string, param: string, call: () => Promise<T>): Promise<T>;
  /** True once a call aborted the runtime: this instance must not be used again. */
  readonly retired: boolean;
}

/** This module's URL; undefined in a CommonJS build made without `import.meta` shims. */
function ownModuleUrl(): string | undefined {
  const url: unknown = import.meta.url;
  if (typeof url === 'string' && url.length > 0) return url;
  return typeof __filename === 'string' ? pathToFileURL(__filename).href : undefined;
}

/**
 * Finds the script: through Node's resolution from `moduleUrl` (default this module; `null` skips it), else beside
 * the main script (a bundle).
 */
export function locateXGrammar(
  moduleUrl: string | null = ownModuleUrl() ?? null,
  mainScript: string | undefined = process.argv[1],
): string {
  const looked: string[] = [];
  if (moduleUrl !== null) {
    try {
      return createRequire(moduleUrl).resolve(XGRAMMAR_PACKAGE);
    } catch {
      looked.push(`${XGRAMMAR_PACKAGE} from ${moduleUrl}`);
    }
  }
  if (mainScript !== undefined && mainScript.length > 0) {
    const file = path.join(path.dirname(path.resolve(mainScript)), BUNDLED_XGRAMMAR);
    if (existsSync(file)) return file;
    looked.push(file);
  }
  throw new QkValueError(
    'structured output',
    'schema',
    `needs ${XGRAMMAR_PACKAGE}, which was not found (looked for ${looked.join('; ')}); reinstall @qk/qwen3 with its dependencies, or put ${BUNDLED_XGRAMMAR} beside a bundled qk.`,
  );
}

/** The reason in what xgrammar printed: `[FATAL] /path/file.cc:123: Unsupported type "foo"` → `Unsupported type "foo"`. */
export function xgrammarReason(printed: readonly string[]): string | undefined {
  for (let i = printed.length - 1; i >= 0; i--) {
    const line = printed[i]!.trim();
    const fatal = /^\[FATAL\][^:]*:\d+:\s*(.*)$/s.exec(line);
    if (fatal !== null) return fatal[1]!.trim();
  }
  return undefined;
}

/** Loads a fresh copy of xgrammar from `file` (its own WebAssembly memory and runtime). */
export function loadXGrammar(file: string = locateXGrammar()): XGrammarInstance {
  const source = readFileSync(file, 'utf8');
  const printed: string[] = [];
  const quietConsole = {
    ...console,
    // xgrammar prints the reason for an abort, then throws `Aborted()`; we keep the reason for the error instead.
    error: (...args: unknown[]) => {
      printed.push(args.map(String).join(' '));
      if (printed.length > 16) printed.shift();
    },
    warn: (...args: unknown[]) => printed.push(args.map(String).join(' ')),
  };
  // Node's own CommonJS loader compiles the text, so the script's `import('module')` has the importer that
  // `new Function` and `vm` functions lack (in Node 20). The wrapper only hands the script our `console`.
  const loader = new Module(file);
  loader.filename = file;
  loader.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(
    path.dirname(file),
  );
  (loader as unknown as { _compile(code: string, file: string): void })._compile(
    `module.exports = function (console) {${source}\n;return exports;};`,
    file,
  );
  const api = (loader.exports as (console: unknown) => XGrammar)(quietConsole);
  let retired = false;
  return {
    api,
    get retired() {
      return retired;
    },
    async run<T>(op: string, param: string, call: () => Promise<T>): Promise<T> {
      printed.length = 0;
      try {
        return await call();
      } catch (error) {
        if (error instanceof QkValueError) throw error;
        const reason = xgrammarReason(printed) ?? String((error as Error)?.message ?? error);
        // An abort leaves the runtime's state unknown (see the file comment).
        if (/Aborted\(/.test(String(error)) || printed.length > 0) retired = true;
        throw new QkValueError(op, param, `was rejected by the grammar compiler: ${reason}.`);
      }
    },
  };
}
