/**
 * The chat page in real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; no browser
 * download) against `qk serve` on the tiny preset (cpu engine) on a random loopback port: load the page, send a
 * message, watch tokens stream and the stats appear, stop a reply, reload.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CHROMIUM = '/usr/bin/chromium';
const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const qkMain = resolve(root, '../cli/dist/main.js');

let child: ChildProcess;
let url: string;
let browser: Browser;
let page: Page;
let serverLog = '';

async function startServe(): Promise<string> {
  child = spawn(
    process.execPath,
    [
      qkMain,
      'serve',
      '--preset',
      'tiny',
      '--engine',
      'cpu',
      '--port',
      '0',
      '--demo',
      resolve(root, 'dist'),
      '--max-tokens',
      '12',
      '--temperature',
      '0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr!.setEncoding('utf8');
  return new Promise((found, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`qk serve printed no URL within 90 s:\n${serverLog}`)),
      90_000,
    );
    child.stderr!.on('data', (chunk: string) => {
      serverLog += chunk;
      const match = /chat page on (http:\/\/127\.0\.0\.1:\d+)\//.exec(serverLog);
      if (match) {
        clearTimeout(timer);
        found(match[1]!);
      }
    });
    child.on('exit', () => fail(new Error(`qk serve exited:\n${serverLog}`)));
  });
}

async function queued(): Promise<number> {
  return ((await (await fetch(`${url}/health`)).json()) as { queued: number }).queued;
}

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  // CI installs it (.ci/run); elsewhere the test is skipped with a note.
  if (process.env.CI === 'true')
    throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium package`);
  console.warn(`skipping the browser test: ${CHROMIUM} is missing (apt-get install chromium)`);
}

describe.skipIf(!hasChromium)('the chat page in headless Chromium', () => {
  beforeAll(async () => {
    url = await startServe();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    page = await browser.newPage({ viewport: { width: 900, height: 700 } });
    // The page must load nothing from anywhere but the server.
    page.on('request', (request) => {
      if (!request.url().startsWith(url)) throw new Error(`the page fetched ${request.url()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGINT');
      await Promise.race([exited, new Promise((done) => setTimeout(done, 10_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('loads, streams a reply with its stats, keeps the conversation, and sets thinking per message', async () => {
    await page.goto(url);
    await expect.poll(() => page.getByTestId('model').textContent(), { timeout: 20_000 }).toBe('qwen3-tiny');
    const bodies: unknown[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/v1/chat/completions')) bodies.push(r.postDataJSON());
    });
    await page.getByTestId('input').fill('Hello there');
    await page.getByTestId('send').click();
    const stats = page.getByTestId('stats').last();
    await expect
      .poll(() => stats.textContent(), { timeout: 30_000 })
      .toMatch(/TTFT \d+ ms · [\d.]+ tok\/s · 12 tokens · length/);
    expect(((await page.getByTestId('content').last().textContent()) ?? '').length).toBeGreaterThan(0);
    expect(await page.getByTestId('rate-chart').count()).toBe(1);
    await page.getByTestId('thinking-toggle').uncheck();
    await page.getByTestId('input').fill('And again');
    await page.keyboard.press('Enter');
    await expect
      .poll(() => page.getByTestId('stats').nth(1).textContent(), { timeout: 30_000 })
      .toMatch(/length|stop/);
    expect(await page.getByTestId('user-message').allTextContents()).toEqual(['Hello there', 'And again']);
    const [first, second] = bodies as { messages: unknown[]; enable_thinking: boolean; stream: boolean }[];
    expect(first).toMatchObject({ enable_thinking: true, stream: true });
    expect(second!.enable_thinking).toBe(false);
    expect(second!.messages).toHaveLength(3);
    // The second turn reused the first's cached prefix.
    expect(serverLog).toMatch(/prompt \d+ \(cached [1-9]\d*\)/);
    mkdirSync(resolve(root, 'test-results'), { recursive: true });
    await page.screenshot({ path: resolve(root, 'test-results/demo.png'), fullPage: true });
  });

  it('links to a page with the latest benchmark charts, each one drawn', async () => {
    await page.goto(url);
    await page.getByTestId('bench-link').click();
    await page.waitForURL(/benchmarks\.html$/);
    const images = page.locator('figure img');
    expect(await images.count()).toBeGreaterThan(0);
    for (const image of await images.all()) {
      await expect
        .poll(() => image.evaluate((el) => (el as HTMLImageElement).naturalWidth), { timeout: 10_000 })
        .toBeGreaterThan(0);
    }
    await page.goto(url);
  });

  it('stops a reply on Stop (the server cancels it), and starts afresh on reload', async () => {
    await page.getByTestId('max-tokens').fill('2000');
    await page.getByTestId('input').fill('Tell me a long story');
    await page.getByTestId('send').click();
    const stats = page.getByTestId('stats').last();
    await expect.poll(() => stats.textContent(), { timeout: 30_000 }).toMatch(/tok\/s/);
    await page.getByTestId('stop').click();
    await expect.poll(() => stats.textContent(), { timeout: 10_000 }).toMatch(/stopped$/);
    await expect.poll(queued, { timeout: 5_000 }).toBe(0);
    // The queue count drops when the generation settles; the server logs the cancel just after, and its stderr
    // reaches this process through a pipe, so the line may arrive after /health already says 0.
    await expect
      .poll(() => serverLog, { timeout: 5_000 })
      .toContain('client disconnected, generation cancelled');
    await page.reload();
    await expect.poll(() => page.getByTestId('model').textContent(), { timeout: 20_000 }).toBe('qwen3-tiny');
    expect(await page.getByTestId('assistant-message').count()).toBe(0);
    await page.getByTestId('input').fill('Hi');
    await page.getByTestId('send').click();
    await expect
      .poll(() => page.getByTestId('stats').last().textContent(), { timeout: 30_000 })
      .toMatch(/length|stop/);
  });
});
