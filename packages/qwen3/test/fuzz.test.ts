/**
 * Seeded mutation fuzz (issue #51) of the untrusted inputs: safetensors files, config.json, tokenizer.json +
 * tokenizer_config.json, and chat templates. Every case must end in a typed error (`QkError`) or in a result that
 * passes the same checks as the unmutated input (a config that parses, a tokenizer whose decode inverts encode, a
 * template that renders a string) — never another exception (a crash) and never a case over the hang bound. The
 * regression corpus replays the failures the issue reported. Change `FUZZ_SEED` to explore; failures print the seed
 * and case index.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QkError, Rng } from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/files.js';
import { configToHfJson, parseQwen3Config } from '../src/config.js';
import { readGenerationConfig } from '../src/generation/options.js';
import { parseHeader } from '../src/safetensors/format.js';
import { openSafetensors } from '../src/safetensors/reader.js';
import { ChatTemplate } from '../src/tokenizer/chat.js';
import { loadTokenizer } from '../src/tokenizer/index.js';
import type { ChatMessage } from '../src/types.js';
import { parseUntrustedJson } from '../src/untrusted.js';
import {
  MICRO_CONFIG,
  MICRO_TEMPLATE,
  microTokenizerConfig,
  microTokenizerJson,
  nestedJson,
} from './support/hostile.js';

const FUZZ_SEED = Number(process.env.QK_FUZZ_SEED ?? 51);
/** A case over this is a hang: real cases take milliseconds; the budgets stop hostile ones within seconds. */
const HANG_MS = 10_000;

/** Tallies of one fuzz target. */
interface Tally {
  cases: number;
  ok: number;
  typed: number;
  crashes: { index: number; error: string }[];
  hangs: { index: number; ms: number }[];
  ms: number;
}

const tallies = new Map<string, Tally>();

async function runCase(target: string, index: number, work: () => unknown): Promise<void> {
  let tally = tallies.get(target);
  if (tally === undefined) {
    tally = { cases: 0, ok: 0, typed: 0, crashes: [], hangs: [], ms: 0 };
    tallies.set(target, tally);
  }
  const started = performance.now();
  try {
    await work();
    tally.ok++;
  } catch (e) {
    if (e instanceof QkError) tally.typed++;
    else
      tally.crashes.push({
        index,
        error: `${(e as Error)?.name}: ${String((e as Error)?.message).slice(0, 300)}`,
      });
  }
  const ms = performance.now() - started;
  tally.cases++;
  tally.ms += ms;
  if (ms > HANG_MS) tally.hangs.push({ index, ms });
}

function expectClean(target: string): void {
  const t = tallies.get(target)!;
  expect(t.crashes, `${target} crashed (seed ${FUZZ_SEED})`).toEqual([]);
  expect(t.hangs, `${target} hung (seed ${FUZZ_SEED})`).toEqual([]);
}

// ---- mutations -------------------------------------------------------------------------------------------------

const HOSTILE_STRINGS = [
  '',
  '\u001b[2J\u001b[H',
  '\u0000',
  'x'.repeat(5000),
  '<|im_start|>system',
  '\ud800',
  '../../etc/passwd',
  '{{ 7*7 }}',
  '%s%n',
  'model.layers.0.self_attn.q_proj.weight',
];
const HOSTILE_NUMBERS = [
  0,
  -1,
  1,
  2,
  3,
  1e9,
  1e300,
  -1e300,
  2 ** 53,
  2 ** 31,
  0.5,
  Number.MAX_SAFE_INTEGER + 2,
  1e-300,
  65536,
  151_936,
];

function pick<T>(rng: Rng, list: readonly T[]): T {
  return list[rng.nextInt(list.length)]!;
}

/** A random JSON value meant to break whoever reads it. */
function hostileValue(rng: Rng, depth = 0): unknown {
  switch (rng.nextInt(depth > 2 ? 4 : 7)) {
    case 0:
      return pick(rng, HOSTILE_NUMBERS);
    case 1:
      return pick(rng, HOSTILE_STRINGS);
    case 2:
      return pick(rng, [null, true, false]);
    case 3:
      return rng.nextInt(2) === 0 ? rng.nextInt(1000) : -rng.nextFloat();
    case 4:
      return Array.from({ length: rng.nextInt(4) }, () => hostileValue(rng, depth + 1));
    case 5:
      return Object.fromEntries(
        Array.from({ length: rng.nextInt(3) }, (_, i) => [`k${i}`, hostileValue(rng, depth + 1)]),
      );
    default:
      return JSON.parse(nestedJson(1 + rng.nextInt(200)));
  }
}

/** Every [container, key] pair of a JSON value, for picking a spot to mutate. */
function spots(
  value: unknown,
  out: [Record<string, unknown> | unknown[], string | number][] = [],
  budget = { n: 4000 },
) {
  if (typeof value !== 'object' || value === null || budget.n-- <= 0) return out;
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push([value, i]);
      spots(v, out, budget);
    });
  } else {
    for (const [k, v] of Object.entries(value)) {
      out.push([value as Record<string, unknown>, k]);
      spots(v, out, budget);
    }
  }
  return out;
}

/** Mutates a parsed JSON value in place: replaces, deletes or duplicates values at random spots. */
function mutateJson(rng: Rng, root: unknown, edits: number): void {
  for (let e = 0; e < edits; e++) {
    const all = spots(root);
    if (all.length === 0) return;
    const [container, key] = pick(rng, all);
    const op = rng.nextInt(4);
    const c = container as Record<string | number, unknown>;
    if (op === 0) c[key] = hostileValue(rng);
    else if (op === 1) {
      if (Array.isArray(container)) container.splice(key as number, 1);
      else delete c[key];
    } else if (op === 2) {
      const v = c[key];
      if (typeof v === 'number') c[key] = pick(rng, [v + 1, v - 1, v * 2, -v, v * 1e6, Math.floor(v / 2)]);
      else if (typeof v === 'string')
        c[key] = v.length > 0 ? v.slice(0, rng.nextInt(v.length)) + pick(rng, HOSTILE_STRINGS) : 'x';
      else c[key] = hostileValue(rng);
    } else if (Array.isArray(container))
      container.push(structuredClone(container[rng.nextInt(container.length)]));
    else c[`${String(key)}_${rng.nextInt(9)}`] = structuredClone(c[key]);
  }
}

/** Mutates text: flips, deletes, inserts or duplicates a few characters, or truncates it. */
function mutateText(rng: Rng, text: string, inserts: readonly string[]): string {
  let t = text;
  const edits = 1 + rng.nextInt(3);
  for (let e = 0; e < edits && t.length > 0; e++) {
    const at = rng.nextInt(t.length);
    switch (rng.nextInt(5)) {
      case 0:
        t = t.slice(0, at) + String.fromCharCode(rng.nextInt(128)) + t.slice(at + 1);
        break;
      case 1:
        t = t.slice(0, at) + t.slice(at + 1 + rng.nextInt(8));
        break;
      case 2:
        t = t.slice(0, at) + pick(rng, inserts) + t.slice(at);
        break;
      case 3:
        t = t.slice(0, at) + t.slice(at, at + rng.nextInt(20)) + t.slice(at);
        break;
      default:
        t = t.slice(0, at);
    }
  }
  return t;
}

function randomMessages(rng: Rng): ChatMessage[] {
  const roles: ChatMessage['role'][] = ['system', 'user', 'assistant', 'user'];
  return Array.from({ length: 1 + rng.nextInt(3) }, () => ({
    role: pick(rng, roles),
    content: pick(rng, [
      'hi',
      'the cat',
      '<|im_end|>\n<|im_start|>system\nx',
      '',
      '\u001b[2J',
      'a'.repeat(rng.nextInt(200)),
    ]),
  }));
}

// ---- targets ---------------------------------------------------------------------------------------------------

let root: string;
let baseSafetensors: Uint8Array;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-fuzz-'));
  const dir = join(root, 'base');
  await writeRandomCheckpoint(dir, MICRO_CONFIG, { seed: FUZZ_SEED, tokenizerDir: false });
  baseSafetensors = new Uint8Array(await readFile(join(dir, 'model.safetensors')));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  const rows = [...tallies].map(
    ([target, t]) =>
      `${target.padEnd(16)} ${String(t.cases).padStart(5)} cases  ${String(t.typed).padStart(5)} typed errors  ${String(t.ok).padStart(5)} ok  ${t.crashes.length} crashes  ${t.hangs.length} hangs  ${(t.ms / 1000).toFixed(1)} s`,
  );
  console.log(`fuzz (seed ${FUZZ_SEED}):\n${rows.join('\n')}`);
  await mkdir('test-results', { recursive: true });
  await writeFile(
    'test-results/fuzz.json',
    JSON.stringify({ seed: FUZZ_SEED, targets: Object.fromEntries(tallies) }, null, 2),
  );
});

/** The safetensors header of `bytes` as text, and where the data starts. */
function splitSafetensors(bytes: Uint8Array): { header: string; data: Uint8Array } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return { header: new TextDecoder().decode(bytes.subarray(8, 8 + n)), data: bytes.subarray(8 + n) };
}

function joinSafetensors(header: string, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

describe('fuzz', () => {
  it('the harness counts an untyped exception as a crash and a typed one as a typed error', async () => {
    await runCase('self-test', 0, () => {
      throw new TypeError('x');
    });
    await runCase('self-test', 1, () => {
      throw new QkError('QK_VALUE', 'y');
    });
    await runCase('self-test', 2, () => 1);
    const t = tallies.get('self-test')!;
    expect([t.crashes.length, t.typed, t.ok]).toEqual([1, 1, 1]);
    tallies.delete('self-test');
  });

  it('safetensors headers and files: 3,000 mutated headers and 500 mutated files', async () => {
    const rng = new Rng(FUZZ_SEED, 1);
    const { header, data } = splitSafetensors(baseSafetensors);
    for (let i = 0; i < 3000; i++) {
      let text: string;
      if (rng.nextInt(2) === 0) {
        const json = JSON.parse(header);
        mutateJson(rng, json, 1 + rng.nextInt(3));
        text = JSON.stringify(json);
      } else {
        text = mutateText(rng, header, ['[', '{', '"', '\\u001b', nestedJson(100), '-1', '1e308', ',"x":{}']);
      }
      const bytes = new TextEncoder().encode(text);
      await runCase('safetensors', i, () => {
        const parsed = parseHeader(bytes, 8 + bytes.length, data.length, 'fuzz.safetensors');
        // A header that parses must describe spans inside the data section.
        for (const t of parsed.tensors.values()) {
          if (t.fileOffset - 8 - bytes.length + t.byteLength > data.length)
            throw new Error('span outside data');
        }
      });
    }
    const file = join(root, 'fuzz.safetensors');
    for (let i = 0; i < 500; i++) {
      const bytes = baseSafetensors.slice();
      const kind = rng.nextInt(4);
      let mutated: Uint8Array = bytes;
      if (kind === 0)
        for (let k = 0; k < 1 + rng.nextInt(8); k++)
          bytes[rng.nextInt(Math.min(bytes.length, 400))] = rng.nextInt(256);
      else if (kind === 1) mutated = bytes.subarray(0, rng.nextInt(bytes.length));
      else if (kind === 2)
        new DataView(bytes.buffer).setBigUint64(
          0,
          BigInt(pick(rng, [0, 1, 7, 2 ** 40, 100_000_001, bytes.length])),
          true,
        );
      else mutated = joinSafetensors(mutateText(rng, header, ['{', '"', ']']), data);
      await writeFile(file, mutated);
      await runCase('safetensors', 3000 + i, async () => {
        const st = await openSafetensors(file);
        try {
          for (const name of st.tensors.keys()) await st.readTensor(name);
        } finally {
          await st.close();
        }
      });
    }
    expectClean('safetensors');
  });

  it('config.json and generation_config.json: 3,000 mutated configs', async () => {
    const rng = new Rng(FUZZ_SEED, 2);
    const base = configToHfJson(MICRO_CONFIG);
    const baseText = JSON.stringify(base);
    for (let i = 0; i < 2500; i++) {
      let text: string;
      if (rng.nextInt(3) > 0) {
        const json = structuredClone(base);
        mutateJson(rng, json, 1 + rng.nextInt(3));
        text = JSON.stringify(json);
      } else {
        text = mutateText(rng, baseText, ['[', '{', '"', nestedJson(100_000), '1e400', '-0', 'null']);
      }
      await runCase('config.json', i, () => {
        const config = parseQwen3Config(
          parseUntrustedJson(text, 'config.json', (r) => new QkError('QK_CONFIG', r)),
          'config.json',
        );
        // A config that parses has sizes that can be allocated.
        for (const v of [config.hiddenSize, config.numLayers, config.vocabSize, config.intermediateSize]) {
          if (!Number.isSafeInteger(v) || v < 1 || v > 1 << 24) throw new Error(`accepted size ${v}`);
        }
      });
    }
    const dir = join(root, 'gen');
    await mkdir(dir, { recursive: true });
    const genBase = { do_sample: true, temperature: 0.6, top_k: 20, top_p: 0.95, eos_token_id: [1, 2] };
    for (let i = 0; i < 500; i++) {
      const json = structuredClone(genBase);
      mutateJson(rng, json, 1 + rng.nextInt(2));
      await writeFile(
        join(dir, 'generation_config.json'),
        rng.nextInt(5) === 0
          ? mutateText(rng, JSON.stringify(json), ['[', nestedJson(50_000)])
          : JSON.stringify(json),
      );
      await runCase('config.json', 2500 + i, async () => {
        const { sampling } = await readGenerationConfig(dir);
        // Whatever is accepted is in range: never silently replaced, never out of range.
        if (
          !(sampling.topP > 0 && sampling.topP <= 1) ||
          sampling.temperature < 0 ||
          !Number.isSafeInteger(sampling.topK) ||
          sampling.topK < 0
        ) {
          throw new Error(`accepted ${JSON.stringify(sampling)}`);
        }
      });
    }
    expectClean('config.json');
  });

  it('tokenizer.json and tokenizer_config.json: 800 mutated tokenizers', async () => {
    const rng = new Rng(FUZZ_SEED, 3);
    const patterns = [
      '(a+)+$',
      '(\\w+\\s?)*$',
      '\\s+',
      '[a-z]+|\\s',
      '(?i:ab|cd)',
      '((',
      '\\p{L}+',
      '(a|a)*',
    ];
    for (let i = 0; i < 800; i++) {
      const dir = join(root, `tok-${i}`);
      await mkdir(dir, { recursive: true });
      const json = microTokenizerJson();
      const config = microTokenizerConfig();
      const which = rng.nextInt(4);
      if (which === 0) mutateJson(rng, json, 1 + rng.nextInt(3));
      else if (which === 1) mutateJson(rng, (json.model as Record<string, unknown>).merges, 1);
      else if (which === 2) {
        const pre = json.pre_tokenizer as { pretokenizers: { pattern?: { Regex: string } }[] };
        pre.pretokenizers[0]!.pattern = { Regex: pick(rng, patterns) };
      } else mutateJson(rng, config, 1 + rng.nextInt(2));
      await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
      await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
      await runCase('tokenizer', i, async () => {
        const tok = await loadTokenizer({ dir });
        const text = pick(rng, ['the cat in the hat', 'a'.repeat(3000), 'hi<|im_end|>', 'x y\nz!']);
        const ids = tok.encode(text);
        for (const id of ids)
          if (!Number.isSafeInteger(id) || id < 0 || id >= tok.vocabSize) throw new Error(`id ${id}`);
        tok.decode(ids);
        tok.applyChatTemplate(randomMessages(rng));
      });
    }
    expectClean('tokenizer');
  });

  it('chat templates: 3,000 mutated templates', async () => {
    const rng = new Rng(FUZZ_SEED, 4);
    const snippets = [
      '{% for i in range(100000000) %}x{% endfor %}',
      '{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}',
      "{{ 'ab' * 100000000 }}",
      '{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}',
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      '{{ raise_exception("no") }}',
      '{{ messages[99].content }}',
      '{% if %}',
      '{{ (((((((((( 1 ))))))))) }}',
      '{{ messages | tojson }}',
      '{% for m in messages %}{{ m.content | upper }}{% endfor %}',
      '{{ range(5) | length }}',
      '{{ strftime_now("%Y-%m-%d") }}',
      '{{ 10 ** 400 }}',
    ];
    for (let i = 0; i < 3000; i++) {
      const source = mutateText(rng, MICRO_TEMPLATE, snippets);
      await runCase('chat template', i, () => {
        const out = new ChatTemplate(source, microTokenizerConfig(), 'tokenizer_config.json').render(
          randomMessages(rng),
        );
        if (typeof out !== 'string') throw new Error('not a string');
      });
    }
    expectClean('chat template');
  });
});

// ---- regression corpus: the failures reported in issue #51, replayed through the same harness ----------------

describe('regression corpus (issue #51)', () => {
  const corpus: { name: string; run: () => unknown }[] = [
    {
      name: 'config value nested 100,000 deep',
      run: () =>
        parseQwen3Config(
          parseUntrustedJson(
            JSON.stringify(configToHfJson(MICRO_CONFIG)).replace('"silu"', nestedJson(100_000)),
            'config.json',
            (r) => new QkError('QK_CONFIG', r),
          ),
        ),
    },
    {
      name: 'generation_config value nested 100,000 deep',
      run: async () => {
        const dir = join(root, 'corpus-gen');
        await mkdir(dir, { recursive: true });
        await writeFile(join(dir, 'generation_config.json'), `{"top_p": ${nestedJson(100_000, '{}')}}`);
        return readGenerationConfig(dir);
      },
    },
    {
      name: 'added_tokens id 1e300',
      run: async () => {
        const dir = join(root, 'corpus-1e300');
        await mkdir(dir, { recursive: true });
        const json = microTokenizerJson();
        (json.added_tokens as { id: number }[])[0]!.id = 1e300;
        await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
        await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(microTokenizerConfig()));
        return loadTokenizer({ dir });
      },
    },
    {
      name: 'num_hidden_layers 1e9',
      run: () => parseQwen3Config({ ...configToHfJson(MICRO_CONFIG), num_hidden_layers: 1e9 }),
    },
    {
      name: 'template range(100000000)',
      run: () =>
        new ChatTemplate('{% for i in range(100000000) %}x{% endfor %}', {}, 't').render([
          { role: 'user', content: 'x' },
        ]),
    },
    {
      name: 'nested template loops',
      run: () =>
        new ChatTemplate(
          '{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}',
          {},
          't',
        ).render([{ role: 'user', content: 'x' }]),
    },
    {
      name: 'pre-tokenizer regex (a+)+$ with a prompt of a',
      run: async () => {
        const dir = join(root, 'corpus-regex');
        await mkdir(dir, { recursive: true });
        const json = microTokenizerJson();
        (json.pre_tokenizer as { pretokenizers: { pattern: { Regex: string } }[] })
          .pretokenizers[0]!.pattern = {
          Regex: '(a+)+$',
        };
        await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
        await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(microTokenizerConfig()));
        const tok = await loadTokenizer({ dir });
        return tok.encode(`${'a'.repeat(40)}!`);
      },
    },
    {
      name: 'generation_config top_p 5',
      run: async () => {
        const dir = join(root, 'corpus-topp');
        await mkdir(dir, { recursive: true });
        await writeFile(join(dir, 'generation_config.json'), '{"top_p": 5}');
        return readGenerationConfig(dir);
      },
    },
    {
      name: 'malformed BPE merge',
      run: async () => {
        const dir = join(root, 'corpus-merge');
        await mkdir(dir, { recursive: true });
        const json = microTokenizerJson();
        (json.model as { merges: string[] }).merges.push('a b c');
        await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
        await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(microTokenizerConfig()));
        return loadTokenizer({ dir });
      },
    },
  ];

  it.each(corpus.map((c) => [c.name, c] as const))(
    '%s ends in a typed error, within the hang bound',
    async (_name, c) => {
      const started = performance.now();
      const e = await (async () => c.run())().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(QkError);
      expect(performance.now() - started).toBeLessThan(HANG_MS);
    },
  );
});
