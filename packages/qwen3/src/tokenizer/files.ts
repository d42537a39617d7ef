/**
 * Finding and reading tokenizer files: a model directory's own `tokenizer.json` + `tokenizer_config.json`, or
 * the bundled Qwen3 pair (an override directory, the CLI bundle's `tokenizer/` folder, or the `tokenizer/` folder
 * shipped inside this package).
 */
import { existsSync, lstatSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { QkTokenizerError } from '../errors.js';
import { describeValue, LIMITS, readRegularFile, readUntrustedJson } from '../untrusted.js';

/** File name of the Hugging Face `tokenizers` definition. */
export const TOKENIZER_JSON = 'tokenizer.json';
/** File name of the `transformers` tokenizer settings (special tokens, chat template). */
export const TOKENIZER_CONFIG = 'tokenizer_config.json';
/** Newer `transformers` versions save the chat template here instead of inside `tokenizer_config.json`. */
const CHAT_TEMPLATE_FILE = 'chat_template.jinja';
/** Environment variable naming a directory that holds the tokenizer pair to use instead of the bundled one. */
export const TOKENIZER_DIR_ENV = 'QK_TOKENIZER_DIR';
/** This package: its `tokenizer/` folder holds the Qwen3 tokenizer pair (see tokenizer/README.md there). */
const OWN_PACKAGE = '@qk/qwen3';

/** Absolute paths of a tokenizer pair. */
export interface TokenizerFiles {
  /** Path of `tokenizer.json`. */
  readonly tokenizerJson: string;
  /** Path of `tokenizer_config.json`. */
  readonly tokenizerConfig: string;
}

/** The parsed contents of a tokenizer pair. */
export interface TokenizerData {
  readonly tokenizerJson: Record<string, unknown>;
  readonly tokenizerConfig: Record<string, unknown>;
  /** The Jinja chat template, when the files define one. */
  readonly chatTemplate: string | undefined;
  /** Where the data came from, for error messages. */
  readonly source: string;
}

/** Where {@link locateBundledTokenizer} looks; each field defaults to the running process's value. */
export interface BundledSearchInputs {
  /** Value of `QK_TOKENIZER_DIR`. */
  readonly envDir?: string | undefined;
  /** Path of the main script (`process.argv[1]`). */
  readonly mainScript?: string | undefined;
  /** URL of this module, also where the search for this package's own `tokenizer/` folder starts. */
  readonly moduleUrl?: string | undefined;
}

/** The outcome of a search: the pair found (if any) and one line per place looked. */
export interface BundledSearchResult {
  readonly files: TokenizerFiles | undefined;
  readonly looked: readonly string[];
}

/** This module's URL; undefined in a CommonJS build made without `import.meta` shims. */
function ownModuleUrl(): string | undefined {
  const url: unknown = import.meta.url;
  if (typeof url === 'string' && url.length > 0) return url;
  return typeof __filename === 'string' ? pathToFileURL(__filename).href : undefined;
}

function isFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function pairIn(dir: string): TokenizerFiles {
  return { tokenizerJson: path.join(dir, TOKENIZER_JSON), tokenizerConfig: path.join(dir, TOKENIZER_CONFIG) };
}

/** Names of the files of the pair that `dir` lacks. */
function missingFiles(files: TokenizerFiles): string[] {
  const missing: string[] = [];
  if (!isFile(files.tokenizerJson)) missing.push(TOKENIZER_JSON);
  if (!isFile(files.tokenizerConfig)) missing.push(TOKENIZER_CONFIG);
  return missing;
}

/** Directories next to the main script and to this module, following a symlinked script to its real place. */
function bundleFolders(mainScript: string | undefined, moduleUrl: string | undefined): string[] {
  const folders: string[] = [];
  if (mainScript !== undefined && mainScript.length > 0) {
    const script = path.resolve(mainScript);
    folders.push(path.join(path.dirname(script), 'tokenizer'));
    try {
      folders.push(path.join(path.dirname(realpathSync(script)), 'tokenizer'));
    } catch {
      // A script that cannot be resolved (e.g. `node -e`) adds nothing beyond its literal path.
    }
  }
  if (moduleUrl?.startsWith('file:')) {
    folders.push(path.join(path.dirname(fileURLToPath(moduleUrl)), 'tokenizer'));
  }
  return [...new Set(folders)];
}

/**
 * The root of the `@qk/qwen3` package holding `fromDir` (its `src/` or `dist/` folder), found by walking up to the
 * first `package.json` with that name; `undefined` outside the package (e.g. in a bundle).
 */
function ownPackageRoot(fromDir: string): string | undefined {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === OWN_PACKAGE) return dir;
    } catch {
      // No (readable) package.json here: keep walking up.
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * Looks for the bundled Qwen3 tokenizer pair in order: `QK_TOKENIZER_DIR`; a `tokenizer/` folder beside the main
 * script or this module (where the self-contained CLI bundle ships it); the `tokenizer/` folder of this package.
 */
export function locateBundledTokenizer(inputs: BundledSearchInputs = {}): BundledSearchResult {
  const envDir = 'envDir' in inputs ? inputs.envDir : process.env[TOKENIZER_DIR_ENV];
  const mainScript = 'mainScript' in inputs ? inputs.mainScript : process.argv[1];
  const moduleUrl = 'moduleUrl' in inputs ? inputs.moduleUrl : ownModuleUrl();
  const looked: string[] = [];

  const candidates: { label: string; dir: string }[] = [];
  if (envDir !== undefined && envDir.length > 0) {
    candidates.push({ label: `${TOKENIZER_DIR_ENV}=${envDir}`, dir: path.resolve(envDir) });
  } else {
    looked.push(`${TOKENIZER_DIR_ENV} (not set)`);
  }
  for (const dir of bundleFolders(mainScript, moduleUrl)) candidates.push({ label: dir, dir });

  for (const { label, dir } of candidates) {
    const files = pairIn(dir);
    const missing = missingFiles(files);
    if (missing.length === 0) return { files, looked };
    looked.push(`${label} (no ${missing.join(', no ')})`);
  }

  if (moduleUrl === undefined || !moduleUrl.startsWith('file:')) {
    looked.push(`${OWN_PACKAGE}/tokenizer (this module's location is unknown)`);
    return { files: undefined, looked };
  }
  const moduleDir = path.dirname(fileURLToPath(moduleUrl));
  const root = ownPackageRoot(moduleDir);
  if (root === undefined) {
    looked.push(`${OWN_PACKAGE}/tokenizer (no ${OWN_PACKAGE} package.json above ${moduleDir})`);
    return { files: undefined, looked };
  }
  const files = pairIn(path.join(root, 'tokenizer'));
  const missing = missingFiles(files);
  if (missing.length === 0) return { files, looked };
  looked.push(`${path.join(root, 'tokenizer')} (no ${missing.join(', no ')})`);
  return { files: undefined, looked };
}

/**
 * Paths of the bundled Qwen3 `tokenizer.json` and `tokenizer_config.json` (see {@link locateBundledTokenizer}
 * for the search order), or `undefined` when none is found. Bundling scripts copy these files.
 */
export function bundledTokenizerFiles(): TokenizerFiles | undefined {
  return locateBundledTokenizer().files;
}

/** The bundled pair's paths, or a {@link QkTokenizerError} that lists every place looked. */
export function requireBundledTokenizer(inputs?: BundledSearchInputs): TokenizerFiles {
  const { files, looked } = locateBundledTokenizer(inputs);
  if (files !== undefined) return files;
  throw new QkTokenizerError(
    `No Qwen3 tokenizer found. Looked in: ${looked.join('; ')}. Reinstall ${OWN_PACKAGE}, put ` +
      `${TOKENIZER_JSON} and ${TOKENIZER_CONFIG} in a tokenizer/ folder beside the script, set ` +
      `${TOKENIZER_DIR_ENV} to a folder holding both, or pass a model directory that has them.`,
  );
}

/**
 * The pair inside a model directory; `undefined` when it has neither file (the bundled tokenizer applies).
 * A directory with only one of the two is an error, since mixing it with bundled data would be silently wrong.
 */
export function modelDirTokenizer(dir: string): TokenizerFiles | undefined {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new QkTokenizerError(`Model directory ${dir} does not exist; check the path passed as dir.`);
  }
  if (!isDir) throw new QkTokenizerError(`${dir} is not a directory; pass the folder that holds the model.`);
  const files = pairIn(path.resolve(dir));
  // A name that is there but not a regular file (a FIFO, a dangling symlink) is an error, not a missing file.
  for (const file of [files.tokenizerJson, files.tokenizerConfig]) {
    let there = false;
    try {
      lstatSync(file);
      there = true;
    } catch {}
    if (there && !isFile(file)) {
      throw new QkTokenizerError(
        `${file} is not a regular file (a FIFO, a device, a directory or a dangling symbolic link); only regular files are read.`,
      );
    }
  }
  const missing = missingFiles(files);
  if (missing.length === 2) return undefined;
  if (missing.length === 1) {
    const present = missing[0] === TOKENIZER_JSON ? TOKENIZER_CONFIG : TOKENIZER_JSON;
    throw new QkTokenizerError(
      `${dir} has ${present} but no ${missing[0]}; copy both tokenizer files from the model's repository, ` +
        `or remove ${present} to use the bundled Qwen3 tokenizer.`,
    );
  }
  return files;
}

async function readJsonObject(file: string): Promise<Record<string, unknown>> {
  const fail = (reason: string) =>
    new QkTokenizerError(`${file} ${reason}; use the file from the model's repository.`);
  const maxBytes =
    path.basename(file) === TOKENIZER_JSON ? LIMITS.tokenizerJsonBytes : LIMITS.mediumJsonBytes;
  const value = await readUntrustedJson(file, maxBytes, fail);
  if (value === undefined) throw new QkTokenizerError(`Cannot read ${file}: it does not exist.`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new QkTokenizerError(
      `${file} must hold a JSON object, found ${Array.isArray(value) ? 'an array' : describeValue(value)}.`,
    );
  }
  return value as Record<string, unknown>;
}

/** The chat template of a config: a string, or the `default` entry of a list of named templates. */
function templateOf(config: Record<string, unknown>): string | undefined {
  const template = config.chat_template;
  if (typeof template === 'string') return template;
  if (Array.isArray(template)) {
    const named = template as { name?: unknown; template?: unknown }[];
    const chosen = named.find((t) => t?.name === 'default') ?? named[0];
    if (typeof chosen?.template === 'string') return chosen.template;
  }
  return undefined;
}

/** Reads and parses a pair, checking that each file has the shape the tokenizer library needs. */
export async function readTokenizerFiles(files: TokenizerFiles): Promise<TokenizerData> {
  const [tokenizerJson, tokenizerConfig] = await Promise.all([
    readJsonObject(files.tokenizerJson),
    readJsonObject(files.tokenizerConfig),
  ]);
  const model = tokenizerJson.model;
  if (typeof model !== 'object' || model === null || !('vocab' in model)) {
    throw new QkTokenizerError(
      `${files.tokenizerJson} has no "model.vocab" section, so it is not a Hugging Face tokenizers file; ` +
        `use the tokenizer.json from the model's repository.`,
    );
  }
  let chatTemplate = templateOf(tokenizerConfig);
  const templateFile = path.join(path.dirname(files.tokenizerConfig), CHAT_TEMPLATE_FILE);
  if (chatTemplate === undefined && existsSync(templateFile)) {
    chatTemplate = await readRegularFile(
      templateFile,
      LIMITS.configBytes,
      (reason) => new QkTokenizerError(`Cannot read ${templateFile}: it ${reason}.`),
    );
  }
  return { tokenizerJson, tokenizerConfig, chatTemplate, source: path.dirname(files.tokenizerJson) };
}
