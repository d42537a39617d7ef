import { defaultHubCacheDir, defaultPullFilter, hubEndpoint, pullModel } from '@qk/qwen3';
import { parse, UsageError } from '../args.js';
import { withInterrupt } from '../model-options.js';
import { createProgressBar, formatBytes } from '../progress.js';

/** Help text of `qk pull`. */
export const PULL_HELP = `qk pull — download a Qwen3 model from the Hugging Face hub into the local cache

Usage: qk pull OWNER/NAME [options]        e.g. qk pull Qwen/Qwen3-0.6B

Files already in the cache are not downloaded again; an interrupted download resumes where it stopped (run the
same command again); every file is checked against the hub's sha256 (or git blob id) and a corrupted one is
refused. Afterwards \`qk generate --model OWNER/NAME\` and \`loadQwen3('OWNER/NAME')\` load it from the cache
with no network. Weights in formats qk does not read (*.bin, *.gguf, *.onnx, …) are skipped unless --all.

Options:
  --revision REV     branch, tag or commit (default main)
  --cache-dir DIR    the cache (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub:
                     the layout huggingface_hub uses, so either tool finds what the other pulled)
  --all              every file of the repository
  -h, --help         this help

Environment: HF_TOKEN (gated or private repositories), HF_ENDPOINT (a mirror; default https://huggingface.co).`;

/** `qk pull`: resolves to the exit code (0; 1 for a hub error; 2 for usage; 130 when stopped by Ctrl-C). */
export async function pullCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { revision: { type: 'string' }, 'cache-dir': { type: 'string' }, all: { type: 'boolean' } } as const,
    true,
  );
  if (values.help) {
    console.log(PULL_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError('give one repository id, e.g. qk pull Qwen/Qwen3-0.6B');
  const repo = positionals[0]!;
  if (values.revision === '') throw new UsageError('--revision must not be empty');
  const cacheDir = values['cache-dir'] ?? defaultHubCacheDir();
  const bar = createProgressBar(`pulling ${repo}`);
  let interrupted = false;
  const result = await withInterrupt((signal) =>
    pullModel(repo, {
      cacheDir,
      signal,
      ...(values.revision === undefined ? {} : { revision: values.revision }),
      include: values.all ? () => true : defaultPullFilter,
      onProgress: (p) => bar.update(p.loadedBytes, p.totalBytes),
    }).catch((e: unknown) => {
      if (!signal.aborted) throw e;
      interrupted = true;
      return undefined;
    }),
  );
  if (interrupted || result === undefined) {
    process.stderr.write(`\nqk pull: interrupted; run the same command again to resume.\n`);
    return 130;
  }
  bar.finish();
  const total = result.files.reduce((sum, f) => sum + f.size, 0);
  const cached = result.files.filter((f) => f.cached).length;
  console.log(
    `${repo}@${result.revision} (commit ${result.commit.slice(0, 12)}) from ${hubEndpoint()}: ${result.files.length} files, ${formatBytes(total)} (${formatBytes(result.downloadedBytes)} downloaded, ${cached} already cached)`,
  );
  console.log(result.dir);
  console.log(`run it: qk generate --model ${repo} "Hello"`);
  return 0;
}
