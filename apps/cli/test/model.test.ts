/** `qk model` called in-process, so its output and files can be checked without spawning the built CLI. */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { UsageError } from '../src/args.js';
import { modelCommand, parseSize } from '../src/commands/model.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-model-cli-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Runs `qk model …` capturing stdout (console.log) and stderr writes. */
async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    out.push(args.join(' '));
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    err.push(String(chunk));
    return true;
  });
  try {
    const code = await modelCommand(argv);
    return { code, out: out.join('\n'), err: err.join('') };
  } finally {
    vi.restoreAllMocks();
  }
}

async function usage(...argv: string[]): Promise<string> {
  const e = await run(...argv).catch((x) => x);
  expect(e).toBeInstanceOf(UsageError);
  return (e as Error).message;
}

describe('qk model', () => {
  it('has help for the command and both subcommands', async () => {
    expect((await run('--help')).out).toContain('qk model init --preset NAME --out DIR');
    const init = await run('init', '--help');
    expect(init.code).toBe(0);
    for (const word of [
      '--preset',
      '--out',
      '--seed',
      '--dtype',
      '--shard-size',
      '--force',
      '0.6b',
      'tiny',
    ]) {
      expect(init.out).toContain(word);
    }
    expect((await run('info', '-h')).out).toContain('qk model info DIR [--json]');
  });

  it('refuses bad usage with a UsageError that says what is wrong', async () => {
    expect(await usage()).toMatch(/subcommand: init, info, compare, quantize or quality/);
    expect(await usage('frob')).toMatch(/unknown subcommand "frob"/);
    expect(await usage('init', '--out', root)).toMatch(/--preset is required/);
    expect(await usage('init', '--preset', '7b', '--out', root)).toMatch(/unknown preset "7b".*0\.6b/);
    expect(await usage('init', '--preset', 'tiny')).toMatch(/--out DIR is required/);
    expect(await usage('init', '--preset', 'tiny', '--out', root, '--dtype', 'int8')).toMatch(
      /--dtype must be/,
    );
    expect(await usage('init', '--preset', 'tiny', '--out', root, '--seed', '-3')).toMatch(/--seed/);
    expect(await usage('init', '--preset', 'tiny', '--out', root, '--shard-size', '5 parsecs')).toMatch(
      /--shard-size/,
    );
    expect(await usage('init', '--bogus')).toMatch(/bogus/);
    expect(await usage('info')).toMatch(/one checkpoint directory, got none/);
    expect(await usage('info', 'a', 'b')).toMatch(/got a b/);
  });

  it('init writes a sharded tiny checkpoint with progress on stderr; info describes it', async () => {
    const dir = join(root, 'tiny');
    const init = await run('init', '--preset', 'tiny', '--out', dir, '--seed', '9', '--shard-size', '16MiB');
    expect(init.code).toBe(0);
    expect(init.out).toMatch(/Wrote Qwen3 tiny with random weights \(seed 9\)/);
    expect(init.out).toContain('20,235,648');
    expect(init.out).toContain('2 safetensors files');
    // The 37 MiB embedding exceeds 16 MiB and gets a shard of its own; the rest share the second.
    // Not a terminal here: a few plain lines, the last at 100% of the tensor bytes, then the time taken.
    const lines = init.err.trim().split('\n');
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.length).toBeLessThanOrEqual(6);
    expect(init.err).toContain(`100% 40.5 MB / 40.5 MB`);
    expect(lines.at(-1)).toMatch(/writing tiny done in [\d.]+ s/);
    const files = await readdir(dir);
    expect(files).toContain('model.safetensors.index.json');
    expect(files).toContain('model-00002-of-00002.safetensors');
    expect(files).toContain('tokenizer.json');

    const info = await run('info', dir);
    expect(info.code).toBe(0);
    expect(info.out).toMatch(/hidden size\s+128/);
    expect(info.out).toMatch(/attention heads\s+4 \(2 key\/value, head dim 32\)/);
    expect(info.out).toMatch(/tied embeddings\s+yes/);
    expect(info.out).toMatch(/parameters\s+20,235,648/);
    expect(info.out).toMatch(/in 3 files/);
    expect(info.out).toContain('BF16 (46 tensors)');
    const json = JSON.parse((await run('info', dir, '--json')).out);
    expect(json).toMatchObject({ parameters: 20235648, tensors: 46, problems: [] });

    await expect(run('init', '--preset', 'tiny', '--out', dir)).rejects.toThrow(/not empty.*--force/);
    const again = await run('init', '--preset', 'tiny', '--out', dir, '--force', '--dtype', 'f16');
    expect(again.code).toBe(0);
    expect((await readdir(dir)).filter((f) => f.endsWith('.safetensors'))).toEqual(['model.safetensors']);
    expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')).torch_dtype).toBe('float16');
  });

  it('info exits 1 and lists the problems when the tensors do not match the config', async () => {
    const dir = join(root, 'broken');
    await run('init', '--preset', 'tiny', '--out', dir);
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 5 }));
    const info = await run('info', dir);
    expect(info.code).toBe(1);
    expect(info.out).toMatch(/problems.*\n.*11 tensors missing: model\.layers\.4\./);
  });
});

describe('helpers', () => {
  it('parseSize reads decimal and binary units', () => {
    expect(parseSize('5GiB', 'x')).toBe(5 * 2 ** 30);
    expect(parseSize('500MB', 'x')).toBe(500e6);
    expect(parseSize('1.5 kib', 'x')).toBe(1536);
    expect(parseSize('2e9', 'x')).toBe(2e9);
    expect(parseSize('1024', 'x')).toBe(1024);
    for (const bad of ['', 'GiB', '-5GB', '0', '5 parsecs', '1.2.3MB'])
      expect(() => parseSize(bad, 'x')).toThrow(UsageError);
  });
});
