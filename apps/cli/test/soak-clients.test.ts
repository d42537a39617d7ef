/**
 * `qk bench serve`'s clients in a child process (src/serve/soak-clients.ts): the normal path runs in
 * bench-serve.test.ts through the built CLI; here, a child that dies leaves no request waiting forever.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSoakClients } from '../src/serve/soak-clients.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-soak-clients-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const target = { url: 'http://127.0.0.1:9', model: 'm', maxTokens: 4 };
const request = (key: string) => ({
  messages: [{ role: 'user' as const, content: 'hi' }],
  key,
  promptTokens: 3,
});

describe('the soak clients’ child process', () => {
  it('a child that dies answers every waiting and later request with an http error naming how it ended', async () => {
    const entry = join(root, 'dies.mjs');
    // Reads one job line, then exits with code 3 without answering it.
    await writeFile(entry, "process.stdin.once('data', () => process.exit(3));\n");
    const clients = startSoakClients(target, entry);
    try {
      const first = await clients.send(request('a'), 2);
      expect(first.client).toBe(2);
      expect(first.key).toBe('a');
      expect(first.outcome.errors).toEqual([
        { kind: 'http', message: "the soak's client process ended: exit code 3" },
      ]);
      const later = await clients.send(request('b'), 5);
      expect(later.client).toBe(5);
      expect(later.key).toBe('b');
      expect(later.outcome.errors[0]?.message).toMatch(/exit code 3/);
    } finally {
      await clients.close();
    }
  });
});
